#if HERALD_LIBFUZZER
import Foundation

/// The target named by `HERALD_FUZZ_TARGET` (scripts/fuzz sets it), read once.
let selectedTarget: FuzzTarget? = ProcessInfo.processInfo.environment["HERALD_FUZZ_TARGET"].flatMap(FuzzTarget.init(rawValue:))

/// libFuzzer's entry point: one input, run through the selected target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let target = selectedTarget else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("HeraldFuzz: set HERALD_FUZZ_TARGET to one of: \(names)\n".utf8))
        exit(2)
    }
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    target.run(bytes)
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// SwiftPM links an executable with `main` renamed to `<Target>_main` (so tests can link it);
/// this one hands the command line to libFuzzer's driver instead of libFuzzer's own `main`.
@_cdecl("HeraldFuzz_main")
public func heraldFuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
#endif
