import Testing
import HeraldCore

@Suite struct ShardTests {
    @Test func roundTripsAndKeysByJobAndShard() throws {
        let shard = Shard(jobID: "job-1", appID: "demo", shardNo: 2, shardCount: 5,
                          idFrom: "40000000-0000-0000-0000-000000000000", idTo: nil, createdAt: Timestamp(seconds: 1_796_232_859))
        let decoded = try Shard.decode(shard.json.serializedBytes())
        #expect(decoded == shard)
        #expect(shard.messageKey == "job-1/2")
        #expect(shard.json["id_to"] == .null)
    }

    @Test func refusesInconsistentRanges() throws {
        var json = Shard(jobID: "j", appID: "a", shardNo: 0, shardCount: 1, idFrom: "40000000-0000-0000-0000-000000000000",
                         idTo: "30000000-0000-0000-0000-000000000000", createdAt: Timestamp(seconds: 0)).json
        #expect(throws: ValidationError(at: JSONPath.root.appending("id_to"), "must be greater than id_from")) { try Shard(json: json) }
        if case .object(var members) = json {
            members["id_to"] = nil
            members["shard_no"] = .int(1)
            json = .object(members)
        }
        #expect(throws: ValidationError(at: JSONPath.root.appending("shard_no"), "must be less than shard_count")) { try Shard(json: json) }
    }
}
