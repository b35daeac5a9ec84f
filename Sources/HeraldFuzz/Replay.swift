#if !HERALD_LIBFUZZER
import Foundation

/// Without libFuzzer (a plain `swift build`), HeraldFuzz replays files through a target:
/// `HeraldFuzz <target> <file>...`, to reproduce a saved crash under the debugger. Built with
/// `-sanitize=fuzzer -D HERALD_LIBFUZZER` (scripts/fuzz), libFuzzer supplies `main` instead.
@main
struct Replay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
            FileHandle.standardError.write(Data("usage: HeraldFuzz <target> <file>...\ntargets: \(names)\n".utf8))
            exit(2)
        }
        for path in arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("HeraldFuzz: cannot read \(path)\n".utf8))
                exit(1)
            }
            target.run(Array(data))
            print("ok \(path)")
        }
    }
}
#endif
