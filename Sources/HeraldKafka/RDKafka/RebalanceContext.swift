internal import CRdKafka

/// Points librdkafka's rebalance callback at the runtime. `@unchecked Sendable`: `runtime` is
/// set once, before the poll thread starts, and only the poll thread reads it afterwards.
final class RebalanceContext: @unchecked Sendable {
    weak var runtime: ConsumerRuntime?

    /// Routes the rebalance callback of `configuration` to the context's runtime. The client
    /// made from `configuration` keeps the context alive (its `callbackContext`).
    func install(in configuration: RDKafkaConfiguration) {
        rd_kafka_conf_set_opaque(configuration.pointer, Unmanaged.passUnretained(self).toOpaque())
        rd_kafka_conf_set_rebalance_cb(configuration.pointer) { handle, error, partitions, opaque in
            guard let opaque, let handle else { return }
            let context = Unmanaged<RebalanceContext>.fromOpaque(opaque).takeUnretainedValue()
            if let runtime = context.runtime {
                runtime.rebalance(error, partitions)
            } else {
                // No runtime (being torn down): release everything so librdkafka can go on.
                if String(cString: rd_kafka_rebalance_protocol(handle)) == "COOPERATIVE" {
                    if error == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS, let failure = rd_kafka_incremental_unassign(handle, partitions) {
                        rd_kafka_error_destroy(failure)
                    }
                } else {
                    _ = rd_kafka_assign(handle, nil)
                }
            }
        }
    }
}
