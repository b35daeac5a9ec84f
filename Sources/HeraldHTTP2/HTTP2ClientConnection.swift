internal import CNghttp2
import Glibc
import HeraldCrypto

/// One request on its way: what to send, who to tell, and how often it was retried.
final class PendingRequest: HTTP2PoolRequest {
    let request: HTTP2Request
    let completion: (Result<HTTP2Response, HTTP2Error>) -> Void
    let deadline: UInt64
    /// Transparent retries so far (REFUSED_STREAM, above a GOAWAY's last stream).
    var retries = 0
    // The response as it arrives.
    var status = 0
    var rawHeaders: [UInt8] = []
    /// Header bytes received so far, as SETTINGS_MAX_HEADER_LIST_SIZE counts them.
    var headerBytes = 0
    /// Set when the response broke a limit; the stream's close then fails the request with it.
    var refusal: HTTP2Error?
    var body: [UInt8] = []
    var bodyOffset = 0
    var completed = false

    init(request: HTTP2Request, deadline: UInt64, completion: @escaping (Result<HTTP2Response, HTTP2Error>) -> Void) {
        self.request = request
        rawHeaders.reserveCapacity(256)
        self.deadline = deadline
        self.completion = completion
    }

    func finish(_ result: Result<HTTP2Response, HTTP2Error>) {
        guard !completed else { return }
        completed = true
        completion(result)
    }
}

/// What a client connection reports to its pool (all on the loop thread). The pool's
/// ``HTTP2PoolStateMachine`` decides what follows; the connection only reports.
protocol HTTP2ClientConnectionOwner: AnyObject {
    /// The server's first SETTINGS arrived.
    func connectionBecameReady(_ connection: HTTP2ClientConnection, maxStreams: Int)
    /// A later SETTINGS carried this `SETTINGS_MAX_CONCURRENT_STREAMS`.
    func connectionMaxStreamsChanged(_ connection: HTTP2ClientConnection, maxStreams: Int)
    /// The connection takes no new stream (GOAWAY, or out of stream ids).
    func connectionGoingAway(_ connection: HTTP2ClientConnection)
    /// One stream the pool submitted ended (whatever its outcome), before its request finishes.
    func streamEnded(on connection: HTTP2ClientConnection)
    /// Requests the server never processed: send them again elsewhere.
    func retry(_ requests: [PendingRequest])
    /// The connection is gone; `neverProcessed` (above a GOAWAY's last stream id) may go elsewhere.
    func connectionClosed(_ connection: HTTP2ClientConnection, error: HTTP2Error, neverProcessed: [PendingRequest])
}

/// A client connection: TCP, TLS with ALPN h2, an nghttp2 client session and its streams.
final class HTTP2ClientConnection: HTTP2Transport {
    weak var owner: (any HTTP2ClientConnectionOwner)?
    /// The pool's name for this connection (``HTTP2PoolStateMachine/ConnectionID``).
    let poolID: Int
    let authority: String
    let initialWindowSize: UInt32
    private(set) var ready = false
    /// The last stream id of the server's GOAWAY, once received.
    private(set) var goawayLastStreamID: Int32?
    var streams: [Int32: PendingRequest] = [:]
    private var pingSentAt: UInt64?
    private let constantHeaders: EncodedHeaderBlock
    /// Reused for every submit, so laying out a request's headers allocates nothing.
    private var nvScratch: [nghttp2_nv] = []

    init(loop: EventLoop, poolID: Int, fd: Int32, tls: TLSStream, authority: String, initialWindowSize: UInt32) {
        self.poolID = poolID
        self.authority = authority
        self.initialWindowSize = initialWindowSize
        self.constantHeaders = EncodedHeaderBlock([HeaderField(":scheme", "https"), HeaderField(":authority", authority)])
        super.init(loop: loop, fd: fd, tls: tls, connecting: true)
    }

    /// A response header: counted against ``HTTP2ClientLimits/maxResponseHeaderBytes`` and
    /// kept on the stream's request. Shared with the frame fuzzer (`HTTP2ClientSessionFuzzer`).
    static let onHeader: nghttp2_on_header_callback = { session, frame, name, nameLength, value, valueLength, _, _ in
        // The hot path: no dictionary lookup, no strings; the stream carries its request.
        guard let frame, let name, let value, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
              let opaque = nghttp2_session_get_stream_user_data(session, frame.pointee.hd.stream_id) else { return 0 }
        let request = Unmanaged<PendingRequest>.fromOpaque(opaque).takeUnretainedValue()
        request.headerBytes += nameLength + valueLength + 32
        if request.headerBytes > HTTP2ClientLimits.maxResponseHeaderBytes {
            request.refusal = HTTP2Error(.headersTooLarge, "the response's headers passed \(HTTP2ClientLimits.maxResponseHeaderBytes) bytes")
            // nghttp2 resets the stream (RST_STREAM INTERNAL_ERROR) and drops the rest of it.
            return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        if nameLength == 7, name[0] == UInt8(ascii: ":"), name[1] == UInt8(ascii: "s") {
            var status = 0
            // A status is three digits; a longer value must not overflow the sum.
            for offset in 0..<min(valueLength, 3) where value[offset] >= 0x30 && value[offset] <= 0x39 {
                status = status * 10 + Int(value[offset] - 0x30)
            }
            request.status = status
        } else {
            HTTP2Response.append(UnsafeBufferPointer(start: name, count: nameLength), UnsafeBufferPointer(start: value, count: valueLength),
                                 to: &request.rawHeaders)
        }
        return 0
    }

    /// A chunk of a response body, kept on the stream's request (at most 1 MiB).
    static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { session, _, streamID, data, length, _ in
        guard let data, let opaque = nghttp2_session_get_stream_user_data(session, streamID) else { return 0 }
        let request = Unmanaged<PendingRequest>.fromOpaque(opaque).takeUnretainedValue()
        // Provider answers are small; a body past 1 MiB means a broken peer.
        if request.body.count + length > 1 << 20 { return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        request.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
        return 0
    }

    override func makeSession() throws(HTTP2Error) {
        let callbacks = try NGHTTP2Callbacks { callbacks in
            nghttp2_session_callbacks_set_on_header_callback(callbacks, HTTP2ClientConnection.onHeader)
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, HTTP2ClientConnection.onDataChunk)
            nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ClientConnection.self) else { return 0 }
                connection.streamClosed(streamID, errorCode: errorCode)
                return 0
            }
            nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ClientConnection.self), let frame else { return 0 }
                connection.frameReceived(frame)
                return 0
            }
            nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, _, user in
                guard let connection = HTTP2Transport.from(user, as: HTTP2ClientConnection.self), let frame else { return 0 }
                // A HEADERS frame nghttp2 could not send (the session is going away): the server
                // never saw the request, so it can go elsewhere.
                if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), let request = connection.streams.removeValue(forKey: frame.pointee.hd.stream_id) {
                    if let session = connection.session {
                        _ = nghttp2_session_set_stream_user_data(session, frame.pointee.hd.stream_id, nil)
                    }
                    connection.owner?.streamEnded(on: connection)
                    connection.owner?.retry([request])
                }
                return 0
            }
        }
        var session: OpaquePointer?
        let option = try HTTP2ClientLimits.makeOption()
        defer { nghttp2_option_del(option) }
        guard nghttp2_session_client_new2(&session, callbacks.pointer, opaque, option) == 0, let session else {
            throw HTTP2Error(.protocolError, "nghttp2_session_client_new2 failed")
        }
        self.session = session
        _ = HTTP2Settings.submit(session, [(HTTP2Settings.enablePush, 0), (HTTP2Settings.initialWindowSize, initialWindowSize),
                                           (HTTP2Settings.maxConcurrentStreams, 1000),
                                           (HTTP2Settings.maxHeaderListSize, UInt32(HTTP2ClientLimits.maxResponseHeaderBytes))])
        _ = nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: Int(initialWindowSize) * 16))
    }

    override func didBecomeActive() {
        // Requests wait for the server's first SETTINGS: APNs allows one stream until a valid
        // token, and opening more before we know would get them refused.
    }

    private func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let type = frame.pointee.hd.type
        if type == UInt8(NGHTTP2_SETTINGS.rawValue), frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
            guard let session else { return }
            let maxStreams = Int(min(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 100_000))
            if !ready {
                ready = true
                owner?.connectionBecameReady(self, maxStreams: maxStreams)
            } else {
                owner?.connectionMaxStreamsChanged(self, maxStreams: maxStreams)
            }
        } else if type == UInt8(NGHTTP2_GOAWAY.rawValue) {
            goawayLastStreamID = frame.pointee.goaway.last_stream_id
            owner?.connectionGoingAway(self)
        } else if type == UInt8(NGHTTP2_PING.rawValue), frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
            pingSentAt = nil
        }
    }

    /// Opens a stream for `request` (the pool decided this connection has room for it).
    func submit(_ request: PendingRequest) {
        guard state == .active, let session else {
            refuse(request)
            return
        }
        let hasBody = !request.request.body.isEmpty
        // nghttp2 hands this back in every callback of the stream; `streams` keeps it alive
        // until the stream closes, so the pointer is never dangling while nghttp2 holds it.
        let streamData = Unmanaged.passUnretained(request).toOpaque()
        let block = request.request.encoded
        let constant = constantHeaders
        nvScratch.removeAll(keepingCapacity: true)
        let streamID: Int32 = block.bytes.withUnsafeBufferPointer { blockBytes in
            constant.bytes.withUnsafeBufferPointer { constantBytes in
                // nghttp2 copies names and values during submit, so these pointers need only
                // live for this call.
                func add(_ field: EncodedHeaderBlock.Field, _ base: UnsafePointer<UInt8>) {
                    let flags = field.neverIndex ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
                    nvScratch.append(nghttp2_nv(name: UnsafeMutablePointer(mutating: base + field.nameStart),
                                                value: UnsafeMutablePointer(mutating: base + field.valueStart),
                                                namelen: field.nameLength, valuelen: field.valueLength, flags: flags))
                }
                guard let blockBase = blockBytes.baseAddress, let constantBase = constantBytes.baseAddress else { return -1 }
                // Pseudo-headers first: :method, :path, then :scheme, :authority, then the rest.
                var index = 0
                block.forEachField { field in
                    if index == 2 { constant.forEachField { add($0, constantBase) } }
                    add(field, blockBase)
                    index += 1
                }
                if index < 3 { constant.forEachField { add($0, constantBase) } }
                return nvScratch.withUnsafeBufferPointer { nvs in
                    if hasBody {
                        var provider = nghttp2_data_provider()
                        provider.read_callback = { session, streamID, buffer, length, flags, _, _ in
                            guard let buffer, let flags, let opaque = nghttp2_session_get_stream_user_data(session, streamID) else {
                                return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
                            }
                            let request = Unmanaged<PendingRequest>.fromOpaque(opaque).takeUnretainedValue()
                            let remaining = request.request.body.count - request.bodyOffset
                            let count = min(remaining, length)
                            request.request.body.withUnsafeBytes { bytes in
                                if let base = bytes.baseAddress {
                                    buffer.update(from: base.advanced(by: request.bodyOffset).assumingMemoryBound(to: UInt8.self), count: count)
                                }
                            }
                            request.bodyOffset += count
                            if request.bodyOffset == request.request.body.count {
                                flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue)
                            }
                            return count
                        }
                        return nghttp2_submit_request(session, nil, nvs.baseAddress, nvs.count, &provider, streamData)
                    }
                    return nghttp2_submit_request(session, nil, nvs.baseAddress, nvs.count, nil, streamData)
                }
            }
        }
        guard streamID > 0 else {
            // Out of stream ids, or the session is closing: another connection can take it.
            refuse(request)
            return
        }
        streams[streamID] = request
        scheduleFlush()
    }

    /// A request this connection cannot open a stream for: it takes no more, and the request
    /// goes elsewhere.
    private func refuse(_ request: PendingRequest) {
        owner?.connectionGoingAway(self)
        owner?.streamEnded(on: self)
        owner?.retry([request])
    }

    private func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let request = streams.removeValue(forKey: streamID) else { return }
        owner?.streamEnded(on: self)
        if let refusal = request.refusal {
            request.finish(.failure(refusal))
        } else if errorCode == UInt32(NGHTTP2_NO_ERROR.rawValue) && request.status > 0 {
            request.finish(.success(HTTP2Response(status: request.status, rawHeaders: request.rawHeaders, body: request.body)))
        } else if errorCode == UInt32(NGHTTP2_REFUSED_STREAM.rawValue) {
            // Never processed (RFC 9113 §8.7): safe to send again.
            request.status = 0
            request.rawHeaders = []
            request.body = []
            request.bodyOffset = 0
            owner?.retry([request])
        } else {
            request.finish(.failure(HTTP2Error(.streamReset(errorCode), "stream reset by the peer: \(String(cString: nghttp2_http2_strerror(errorCode)))")))
        }
    }

    /// Times out streams past their deadline and keeps the connection alive with PINGs.
    func sweep(now: UInt64, pingIntervalNanoseconds: UInt64, pingTimeoutNanoseconds: UInt64) {
        guard state == .active, let session else { return }
        var expired: [Int32] = []
        for (streamID, request) in streams where request.deadline <= now {
            expired.append(streamID)
        }
        for streamID in expired {
            guard let request = streams.removeValue(forKey: streamID) else { continue }
            // Late frames of this stream must not reach a request that may be freed.
            _ = nghttp2_session_set_stream_user_data(session, streamID, nil)
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_CANCEL.rawValue))
            owner?.streamEnded(on: self)
            request.finish(.failure(HTTP2Error(.timeout, "no answer within the request's deadline")))
        }
        if let pingSentAt {
            if now - pingSentAt > pingTimeoutNanoseconds {
                close(HTTP2Error(.connectionLost, "no PING answer within \(pingTimeoutNanoseconds / 1_000_000) ms"))
                return
            }
        } else if now - lastActivity > pingIntervalNanoseconds {
            pingSentAt = now
            _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        }
        if !expired.isEmpty || pingSentAt == now { scheduleFlush() }
    }

    override func didClose(_ error: HTTP2Error) {
        ready = false
        let orphans = streams
        streams.removeAll()
        let goawayNote = goawayLastStreamID.map { "; GOAWAY last stream \($0)" } ?? "; no GOAWAY"
        var neverProcessed: [PendingRequest] = []
        for (streamID, request) in orphans {
            // Above the GOAWAY's last stream id the server processed nothing (RFC 9113 §6.8):
            // such a request can go elsewhere. This covers requests nghttp2 still had queued,
            // unsent, when the GOAWAY and the end of the connection arrived in one read.
            if let last = goawayLastStreamID, streamID > last {
                request.status = 0
                request.rawHeaders = []
                request.body = []
                request.bodyOffset = 0
                neverProcessed.append(request)
                continue
            }
            // The server may have processed these: the caller decides whether to send again.
            if error.code.isGoaway {
                request.finish(.failure(HTTP2Error(.goaway(retryable: false), "the connection closed after GOAWAY with the request in flight")))
            } else {
                request.finish(.failure(HTTP2Error(.connectionLost, "the connection closed with the request in flight (stream \(streamID)\(goawayNote)): \(error.message)")))
            }
        }
        owner?.connectionClosed(self, error: error, neverProcessed: neverProcessed)
    }
}
