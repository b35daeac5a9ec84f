import HeraldKafka
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
}
