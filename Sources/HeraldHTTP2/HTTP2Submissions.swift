/// Requests gathered by one caller and handed to their pools together: one hop onto each pool's
/// event loop for the lot (one closure, at most one wake-up, and one write of the frames they
/// make) instead of one per request. A shard run adds the requests of a refill of its send window
/// and submits them before it waits for anything.
///
/// Not shared: one owner adds and submits. A request added is not sent until ``submit()``.
public final class HTTP2Submissions {
    /// A pool's share of the gathered requests.
    private struct Batch {
        let client: HTTP2Client
        var items: [HTTP2Client.Submission] = []
    }

    private var batches: [Batch] = []
    /// Requests added since the last ``submit()``.
    public private(set) var count = 0

    public init() {}

    /// Adds `request` for `client`; `completion` runs on the client's event loop once it is sent
    /// and answered (or has failed), as with ``HTTP2Client/execute(_:completion:)``.
    public func add(_ request: consuming HTTP2Request, to client: HTTP2Client,
                    completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void) {
        count += 1
        // A run sends to one or two pools: a linear search beats hashing.
        let submission = HTTP2Client.Submission(request: request, completion: completion)
        if let index = batches.firstIndex(where: { $0.client === client }) {
            batches[index].items.append(submission)
        } else {
            batches.append(Batch(client: client, items: [submission]))
        }
    }

    /// Hands every gathered request to its pool.
    public func submit() {
        guard count > 0 else { return }
        for batch in batches where !batch.items.isEmpty { batch.client.execute(batch.items) }
        batches.removeAll(keepingCapacity: true)
        count = 0
    }
}
