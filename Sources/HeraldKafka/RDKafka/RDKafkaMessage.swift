internal import CRdKafka
import HeraldCore

/// Reading a message out of librdkafka.
enum RDKafkaMessage {
    enum Read {
        /// A message, copied out.
        case message(KafkaMessage)
        /// The end of a partition was reached (only with `enable.partition.eof`).
        case endOfPartition
        /// An error event in place of a message.
        case error(rd_kafka_resp_err_t, String)
    }

    /// Copies `raw` out of librdkafka (the caller still destroys it). The message's assignment
    /// epoch is left 0; the consumer stamps it.
    static func read(_ raw: UnsafeMutablePointer<rd_kafka_message_t>) -> Read {
        let message = raw.pointee
        if message.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            if message.err == RD_KAFKA_RESP_ERR__PARTITION_EOF { return .endOfPartition }
            return .error(message.err, rdkafkaErrorText(message.err))
        }
        let topic = message.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        let key: [UInt8]? = message.key.map { Array(UnsafeRawBufferPointer(start: $0, count: message.key_len)) }
        let value: [UInt8] = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: message.len)) } ?? []
        var headers: [KafkaHeader] = []
        var headerList: OpaquePointer?
        if rd_kafka_message_headers(raw, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            var index = 0
            var name: UnsafePointer<CChar>?
            var valuePointer: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(headerList, index, &name, &valuePointer, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let headerValue = valuePointer.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }
                headers.append(KafkaHeader(name: name.map { String(cString: $0) } ?? "", value: headerValue))
                index += 1
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let milliseconds = rd_kafka_message_timestamp(raw, &timestampType)
        let timestamp = timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE || milliseconds < 0 ? nil
            : Timestamp(seconds: milliseconds / 1000, nanoseconds: Int32(milliseconds % 1000) * 1_000_000)
        return .message(KafkaMessage(topic: topic, partition: message.partition, offset: message.offset, key: key, value: value,
                                     isTombstone: message.payload == nil, headers: headers, timestamp: timestamp, assignmentEpoch: 0))
    }
}
