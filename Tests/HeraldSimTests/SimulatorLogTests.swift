import HeraldCore
import HeraldSim
import Testing

@Suite struct SimulatorLogTests {
    @Test func keepsTheNewestEntriesPerTokenInOrderAndIsOffByDefault() {
        let log = SimulatorLog(perToken: 3, maxTokens: 2)
        for index in 1...5 { log.record(token: "a", .int(index)) }
        log.record(token: "b", .int(1))
        log.record(token: "c", .int(1))
        #expect(log.entries(token: "a") == [.int(3), .int(4), .int(5)])
        #expect(log.entries(token: "b") == [.int(1)])
        #expect(log.entries(token: "c").isEmpty)
        #expect(log.json(token: "a")["entries"]?.arrayValue?.count == 3)
        log.reset()
        #expect(log.entries(token: "a").isEmpty)
        let off = SimulatorLog()
        off.record(token: "a", .int(1))
        #expect(!off.isEnabled && off.entries(token: "a").isEmpty)
    }
}
