import HeraldCore
@testable import HeraldKafka
import Testing

@Suite struct KafkaConfigurationTests {
    @Test func librdkafkaReadsPropertiesBack() throws {
        let configuration = KafkaConfiguration(bootstrapServers: "127.0.0.1:9092", properties: ["linger.ms": "25", "client.id": "herald-test"])
        #expect(try configuration.resolvedValue(of: "linger.ms") == "25")
        #expect(try configuration.resolvedValue(of: "client.id") == "herald-test")
        #expect(try configuration.resolvedValue(of: "bootstrap.servers") == "127.0.0.1:9092")
    }

    @Test func refusesUnknownPropertiesNamingThem() {
        let configuration = KafkaConfiguration(bootstrapServers: "x:1", properties: ["no.such.property": "1"])
        #expect {
            try configuration.resolvedValue(of: "linger.ms")
        } throws: { error in
            (error as? KafkaError)?.message.contains("no.such.property") == true
        }
    }

    @Test func passThroughAndRedaction() throws {
        var configuration = KafkaConfiguration(bootstrapServers: "x:1")
        configuration.addPassThroughProperties(from: ["HERALD_KAFKA_PROPERTY_SASL_MECHANISM": "SCRAM-SHA-512",
                                                      "HERALD_KAFKA_PROPERTY_SASL_PASSWORD": "hunter2", "OTHER": "x"])
        #expect(configuration.properties["sasl.mechanism"] == "SCRAM-SHA-512")
        #expect(configuration.properties.count == 3)
        #expect(configuration.redacted["sasl.password"] == "[redacted]")
        #expect(!configuration.redacted.values.contains("hunter2"))
    }

    /// librdkafka's lines are JSON like the worker's own, with the time every line carries.
    @Test func librdkafkaLinesAreJSONWithTheTime() throws {
        let time = Timestamp(seconds: 1_796_601_600, nanoseconds: 250_000_000)
        let line = KafkaLogOutput.line(level: 7, facility: "CGRP", message: "Group \"g\":\tjoin\n", time: time)
        let object = try JSONValue.parse(Array(line.utf8))
        #expect(object["component"] == .string("librdkafka"))
        #expect(object["facility"] == .string("CGRP"))
        #expect(object["level"] == .string("debug"))
        #expect(object["message"] == .string("Group \"g\":\tjoin\n"))
        #expect(object["time"] == .string(time.description))
        #expect(KafkaLogOutput.line(level: 3, facility: "", message: "", time: time).contains(#""level":"error""#))
        #expect(KafkaLogOutput.line(level: 4, facility: "", message: "", time: time).contains(#""level":"warning""#))
    }
}
