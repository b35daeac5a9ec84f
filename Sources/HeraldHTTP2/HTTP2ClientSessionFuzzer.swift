internal import CNghttp2

/// Feeds raw bytes, as a server would send them, into a client session made exactly as
/// `HTTP2ClientConnection` makes one (the same limits, SETTINGS and header and body callbacks)
/// with one request open on stream 1; what the session writes back is drained and dropped.
/// The libFuzzer target `http2-client-frames` (scripts/fuzz); no socket, no TLS.
public enum HTTP2ClientSessionFuzzer {
    /// Receives `bytes` (a server's connection preface and frames) into a fresh client session.
    public static func receive(_ bytes: [UInt8]) {
        guard let callbacks = try? NGHTTP2Callbacks({ callbacks in
            nghttp2_session_callbacks_set_on_header_callback(callbacks, HTTP2ClientConnection.onHeader)
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, HTTP2ClientConnection.onDataChunk)
        }), let option = try? HTTP2ClientLimits.makeOption() else { return }
        defer { nghttp2_option_del(option) }
        var created: OpaquePointer?
        guard nghttp2_session_client_new2(&created, callbacks.pointer, nil, option) == 0, let session = created else { return }
        defer { nghttp2_session_del(session) }
        _ = HTTP2Settings.submit(session, [(HTTP2Settings.enablePush, 0), (HTTP2Settings.initialWindowSize, 65_535),
                                           (HTTP2Settings.maxConcurrentStreams, 1000),
                                           (HTTP2Settings.maxHeaderListSize, UInt32(HTTP2ClientLimits.maxResponseHeaderBytes))])
        // Outlives the session (deleted first, by the defer above): nghttp2 holds its pointer.
        let request = PendingRequest(request: HTTP2Request(method: "GET", path: "/"), deadline: .max) { _ in }
        let fields: [(String, String)] = [(":method", "GET"), (":path", "/"), (":scheme", "https"), (":authority", "fuzz")]
        var storage = fields.map { (Array($0.0.utf8), Array($0.1.utf8)) }
        withExtendedLifetime(request) {
            storage.withUnsafeMutableBufferPointer { pairs in
                var headers: [nghttp2_nv] = []
                for index in pairs.indices {
                    pairs[index].0.withUnsafeMutableBufferPointer { name in
                        pairs[index].1.withUnsafeMutableBufferPointer { value in
                            headers.append(nghttp2_nv(name: name.baseAddress, value: value.baseAddress, namelen: name.count,
                                                      valuelen: value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                        }
                    }
                }
                _ = nghttp2_submit_request(session, nil, headers, headers.count, nil, Unmanaged.passUnretained(request).toOpaque())
            }
            drain(session)
            _ = bytes.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, $0.count) }
            drain(session)
        }
    }

    private static func drain(_ session: OpaquePointer) {
        var data: UnsafePointer<UInt8>?
        for _ in 0..<1000 where nghttp2_session_mem_send(session, &data) > 0 {}
    }
}
