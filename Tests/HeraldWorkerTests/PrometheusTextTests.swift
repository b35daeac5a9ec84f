@testable import HeraldWorker
import Testing

/// The exposition format's own rules (format 0.0.4): families, samples, numbers and escapes.
@Suite struct PrometheusTextTests {
    @Test func writesAFamilyAndItsSamples() {
        var text = PrometheusText()
        text.family("herald_things_total", type: "counter", help: "Things.\nCounted with \\ care.")
        text.sample("herald_things_total", [], 3)
        text.sample("herald_things_total", [("app", "shop"), ("reason", "say \"hi\"\nbye\\")], "4")
        #expect(text.output == """
        # HELP herald_things_total Things.\\nCounted with \\\\ care.
        # TYPE herald_things_total counter
        herald_things_total 3
        herald_things_total{app="shop",reason="say \\"hi\\"\\nbye\\\\"} 4

        """)
    }

    @Test func numbersAreWrittenAsPrometheusReadsThem() {
        #expect(PrometheusText.number(42) == "42")
        #expect(PrometheusText.number(-3) == "-3")
        #expect(PrometheusText.number(0.25) == "0.25")
        #expect(PrometheusText.number(.infinity) == "+Inf")
        #expect(PrometheusText.number(-.infinity) == "-Inf")
        #expect(PrometheusText.number(.nan) == "NaN")
        // Past 1e15 an integral double keeps its exponent rather than overflowing Int64.
        #expect(PrometheusText.number(1e300) == "1e+300")
    }

    @Test func helpTextKeepsQuotesAndACarriageReturnLineFeedIsEscapedByItsLineFeed() {
        #expect(PrometheusText.escapeHelp("a \"b\"") == "a \"b\"")
        #expect(PrometheusText.escapeLabelValue("a\r\nb") == "a\r\\nb")
        #expect(PrometheusText.escapeLabelValue("plain") == "plain")
    }
}
