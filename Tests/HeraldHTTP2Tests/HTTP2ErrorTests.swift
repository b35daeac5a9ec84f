import HeraldHTTP2
import Testing

@Suite struct HTTP2ErrorTests {
    /// Logs and the bench's failure counts show these texts.
    @Test func describesTheCodeWithItsValues() {
        #expect(HTTP2Error(.streamReset(7), "refused").description == "HTTP2Error.streamReset(7): refused")
        #expect(HTTP2Error(.goaway(retryable: false), "closed").description == "HTTP2Error.goaway(retryable: false): closed")
        #expect("\(HTTP2Error.Code.headersTooLarge)" == "headersTooLarge")
    }

    /// A worker sends again after these and not after the others.
    @Test func retriesTransportFaultsAndRefusedStreamsOnly() {
        let retried: [HTTP2Error.Code] = [.connectFailed, .timeout, .connectionLost, .headersTooLarge, .goaway(retryable: true),
                                          .streamReset(7), .streamReset(0), .streamReset(2), .streamReset(11)]
        let final: [HTTP2Error.Code] = [.tlsHandshakeFailed, .protocolError, .shutdown, .goaway(retryable: false), .streamReset(8)]
        #expect(retried.allSatisfy { HTTP2Error($0, "x").isRetryable })
        #expect(!final.contains { HTTP2Error($0, "x").isRetryable })
    }

    @Test func recordsWhereItWasRaised() {
        func connect() throws(HTTP2Error) { throw HTTP2Error(.connectFailed, "refused") }
        let line = #line - 1
        #expect {
            try connect()
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.file == "HeraldHTTP2Tests/HTTP2ErrorTests.swift" && error.line == line
        }
    }

    /// Where each was raised is left out, so a test's expected error equals the code's.
    @Test func equalityComparesCodeAndMessageOnly() {
        let raised = HTTP2Error(.goaway(retryable: true), "the server sent GOAWAY", file: "HeraldHTTP2/HTTP2PoolStateMachine.swift", line: 304)
        #expect(raised == HTTP2Error(.goaway(retryable: true), "the server sent GOAWAY"))
        #expect(raised != HTTP2Error(.goaway(retryable: false), "the server sent GOAWAY"))
        #expect(raised != HTTP2Error(.goaway(retryable: true), "another message"))
    }
}
