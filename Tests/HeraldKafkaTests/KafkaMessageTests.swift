import HeraldKafka
import Testing

@Suite struct KafkaMessageTests {
    @Test func headersKeysAndValuesReadAsText() {
        let message = KafkaMessage(topic: "herald.jobs", partition: 3, offset: 17, key: Array("app/activity".utf8), value: Array("{}".utf8),
                                   headers: [KafkaHeader(name: "trace", string: "abc"), KafkaHeader(name: "null", value: nil),
                                             KafkaHeader(name: "trace", string: "second")])
        #expect(message.topicPartition == KafkaTopicPartition(topic: "herald.jobs", partition: 3))
        #expect(message.topicPartition.description == "herald.jobs/3")
        #expect(message.keyString == "app/activity")
        #expect(message.valueString == "{}")
        #expect(message.header("trace")?.valueString == "abc")
        #expect(message.header("null") != nil && message.header("null")?.valueString == nil)
        #expect(message.header("missing") == nil)
        #expect(!message.isTombstone)
    }

    @Test func producerMessagesFromText() {
        let message = KafkaProducerMessage(topic: "t", key: nil, value: "é")
        #expect(message.key == nil)
        #expect(message.value == [0xC3, 0xA9])
        #expect(message.partition == nil)
        let tombstone = KafkaProducerMessage(topic: "t", key: Array("k".utf8), value: nil)
        #expect(tombstone.value == nil)
    }
}
