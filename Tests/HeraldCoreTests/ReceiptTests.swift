import Testing
import HeraldCore

@Suite struct ReceiptTests {
    private let sub = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"

    @Test func deterministicIDs() {
        var receipt = Receipt(jobID: "job-1", appID: "demo", stage: .accepted, subscriptionID: sub, platform: .ios, at: Timestamp(seconds: 0))
        #expect(receipt.id == "job-1:\(sub):accepted")
        #expect(receipt.messageKey == sub)
        receipt.stage = .clicked
        receipt.actionID = "buy"
        #expect(receipt.id == "job-1:\(sub):clicked:buy")
        let planned = Receipt(jobID: "job-1", appID: "demo", stage: .planned, at: Timestamp(seconds: 0))
        #expect(planned.id == "job-1:planned")
        #expect(planned.messageKey == "job-1")
    }

    @Test func roundTripsEveryStage() throws {
        for stage in Receipt.Stage.allCases {
            var receipt = Receipt(jobID: "job-1", appID: "demo", stage: stage, at: Timestamp(seconds: 1_796_232_859, nanoseconds: 5_000_000))
            if !stage.isJobLevel {
                receipt.subscriptionID = sub
                receipt.platform = .android
            }
            if stage.needsReason { receipt.reason = stage == .halted ? .credentials : .retriesExhausted }
            switch stage {
            case .deferred: receipt.until = Timestamp(seconds: 1_796_240_000)
            case .planned:
                receipt.audienceEstimate = 1_000_000
                receipt.shardCount = 20
            case .halted: receipt.provider = .apns
            case .completed: receipt.totals = Receipt.Totals(accepted: 5, unregistered: 1, failed: 0, dropped: 2)
            case .accepted:
                receipt.providerID = "apns-id-1"
                receipt.attempts = 2
            default: break
            }
            #expect(try Receipt.decode(receipt.json.serializedBytes()) == receipt, "stage \(stage)")
        }
    }

    @Test func directSerialisationIsTheDocumentByteForByte() {
        var receipts: [Receipt] = []
        for stage in Receipt.Stage.allCases {
            var receipt = Receipt(jobID: "job-\"1\"", appID: "demo", stage: stage, at: Timestamp(seconds: 1_796_232_859, nanoseconds: 5_000_000))
            if !stage.isJobLevel {
                receipt.subscriptionID = sub
                receipt.platform = .ios
            }
            receipts.append(receipt)
            var full = receipt
            full.reason = .retriesExhausted
            full.providerReason = "BadDeviceToken\n\u{1}\\ é 😀"
            full.providerID = "apns-id-1"
            full.attempts = 3
            full.until = Timestamp(seconds: 1_796_240_000)
            full.actionID = "buy"
            full.provider = .fcm
            full.audienceEstimate = 1_000_000
            full.shardCount = 20
            full.totals = Receipt.Totals(accepted: 5, unregistered: 1, failed: 0, dropped: 2)
            receipts.append(full)
        }
        for receipt in receipts {
            #expect(receipt.serializedBytes() == receipt.json.serializedBytes(), "\(receipt.stage)")
        }
    }

    @Test func stageSpecificMembersAreRequired() throws {
        let failed = Receipt(jobID: "j", appID: "a", stage: .failed, subscriptionID: sub, at: Timestamp(seconds: 0))
        #expect(throws: ValidationError(at: JSONPath.root.appending("reason"), "is required for stage failed")) {
            try Receipt(json: failed.json)
        }
        let completed = Receipt(jobID: "j", appID: "a", stage: .completed, at: Timestamp(seconds: 0))
        #expect(throws: ValidationError(at: JSONPath.root.appending("totals"), "is required for stage completed")) {
            try Receipt(json: completed.json)
        }
    }

    /// The direct writer (what workers produce) and the document tree give the same bytes, for
    /// receipts of every stage with every optional member set or not, and strings that need escaping.
    @Test func serializedBytesAreTheDocumentsBytes() {
        var generator = SplitMix64(seed: 19)
        func chance() -> Bool { generator.next() % 2 == 0 }
        func text() -> String {
            let pieces = ["a", "Z9", "-", ":", "\"", "\\", "\n", "\u{01}", "\u{E9}", "\u{1F600}", "projects/p/messages/0:1%2"]
            return (0..<Int(generator.next() % 6 + 1)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
        }
        for _ in 0..<2000 {
            let stage = Receipt.Stage.allCases[Int(generator.next() % UInt64(Receipt.Stage.allCases.count))]
            var receipt = Receipt(jobID: text(), appID: text(), stage: stage, at: Timestamp(seconds: Int64(generator.next() % 4_000_000_000),
                                                                                              nanoseconds: Int32(generator.next() % 1_000_000_000)))
            if chance() { receipt.subscriptionID = text() }
            if chance() { receipt.platform = chance() ? .ios : .android }
            if chance() { receipt.reason = Receipt.Reason.allCases[Int(generator.next() % UInt64(Receipt.Reason.allCases.count))] }
            if chance() { receipt.providerReason = text() }
            if chance() { receipt.providerID = text() }
            if chance() { receipt.attempts = Int(generator.next() % 9) }
            if chance() { receipt.until = Timestamp(seconds: Int64(generator.next() % 4_000_000_000)) }
            if chance() { receipt.actionID = text() }
            if chance() { receipt.provider = chance() ? .apns : .fcm }
            if chance() { receipt.audienceEstimate = Int64(generator.next() % 10_000_000) }
            if chance() { receipt.shardCount = Int(generator.next() % 500) }
            if chance() { receipt.totals = Receipt.Totals(accepted: 1, unregistered: 2, failed: 3, dropped: 4) }
            if chance() { receipt.deadLetteredShards = Int(generator.next() % 3) }
            #expect(receipt.serializedBytes() == receipt.json.serializedBytes(), "\(String(decoding: receipt.serializedBytes(), as: UTF8.self))")
        }
    }
}

