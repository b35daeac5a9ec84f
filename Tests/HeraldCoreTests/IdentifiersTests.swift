import Testing
import HeraldCore

@Suite struct IdentifiersTests {
    private func accepts(_ rule: StringRule, _ text: String) -> Bool {
        (try? rule.check(.string(text), at: .root)) != nil
    }

    @Test func jobAndAppIDs() {
        #expect(accepts(Identifiers.jobID, "Campaign.2026-12:01_x"))
        #expect(!accepts(Identifiers.jobID, "has space"))
        #expect(!accepts(Identifiers.jobID, String(repeating: "a", count: 65)))
        #expect(accepts(Identifiers.appID, "shop-app_2"))
        #expect(!accepts(Identifiers.appID, "Shop"))
    }

    @Test func uuidsLanguagesLinks() {
        #expect(accepts(Identifiers.subscriptionID, "0B6C3A2E-4F1D-4A8E-9C2B-5D7E8F901234"))
        #expect(!accepts(Identifiers.subscriptionID, "0b6c3a2e4f1d4a8e9c2b5d7e8f901234"))
        #expect(accepts(Identifiers.language, "pt-BR"))
        #expect(accepts(Identifiers.language, "zh-Hant-TW"))
        #expect(!accepts(Identifiers.language, "e"))
        #expect(!accepts(Identifiers.language, "en_US"))
        #expect(accepts(Identifiers.link, "myapp://orders/42"))
        #expect(!accepts(Identifiers.link, "no scheme"))
        #expect(accepts(Identifiers.imageURL, "https://cdn.example.com/a.png"))
        #expect(!accepts(Identifiers.imageURL, "ftp://cdn.example.com/a.png"))
        #expect(Identifiers.parseClockTime("09:30") == 570)
        #expect(Identifiers.parseClockTime("24:00") == nil)
    }
}
