import HeraldCore
import HeraldPostgres
@testable import HeraldWorker
import Testing

@Suite struct DeviceEventProcessorTests {
    private let event = DeviceEvent(type: .clicked, jobID: "job-1", appID: "shop", subscriptionID: "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234",
                                    actionID: "buy", at: Timestamp(seconds: 1_796_232_859))

    @Test func anEventOfTheOwningAppIsForwardedWithItsPlatform() {
        let owners = DeviceEventOwners(jobAppID: "shop", subscriptionAppID: "shop", platform: .ios)
        #expect(DeviceEventProcessor.verdict(for: event, owners: owners) == .forward(.ios))
    }

    @Test func anEventNamingAnotherAppsJobOrSubscriptionIsForeign() {
        let theirJob = DeviceEventOwners(jobAppID: "bank", subscriptionAppID: "shop", platform: .ios)
        let theirDevice = DeviceEventOwners(jobAppID: "shop", subscriptionAppID: "bank", platform: .android)
        let noDevice = DeviceEventOwners(jobAppID: "shop", subscriptionAppID: nil, platform: nil)
        for owners in [theirJob, theirDevice, noDevice] {
            guard case .foreign = DeviceEventProcessor.verdict(for: event, owners: owners) else {
                Issue.record("\(owners) was not refused")
                continue
            }
        }
    }

    @Test func aConfirmationWithAnActionIDIsTheSameReportAsOneWithout() {
        var confirmed = event
        confirmed.type = .confirmed
        var plain = confirmed
        plain.actionID = nil
        #expect(DeviceEventProcessor.key(for: confirmed) == DeviceEventProcessor.key(for: plain))
        let receipt = DeviceEventProcessor.receipt(for: confirmed, platform: .android)
        #expect(receipt.id == "job-1:0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234:confirmed")
        #expect(receipt.actionID == nil && receipt.stage == .confirmed && receipt.platform == .android)
    }

    @Test func aClickKeepsItsButtonInTheKeyAndTheReceipt() {
        #expect(DeviceEventProcessor.key(for: event).actionID == "buy")
        let receipt = DeviceEventProcessor.receipt(for: event, platform: .ios)
        #expect(receipt.id == "job-1:0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234:clicked:buy")
        #expect(receipt.actionID == "buy" && receipt.at == event.at)
    }

    @Test func anEventForAJobThatIsGoneIsDropped() {
        let owners = DeviceEventOwners(jobAppID: nil, subscriptionAppID: "shop", platform: .ios)
        #expect(DeviceEventProcessor.verdict(for: event, owners: owners) == .drop)
    }
}
