internal import CRdKafka

/// Text of a librdkafka error code.
func rdkafkaErrorText(_ code: rd_kafka_resp_err_t) -> String {
    String(cString: rd_kafka_err2str(code))
}

/// The NUL-terminated text librdkafka wrote into `buffer` (an error text or a property value).
func rdkafkaString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
