internal import COpenSSL
import Glibc

/// TLS settings shared by many connections: an `SSL_CTX` (TLS 1.2+, ALPN `h2`).
///
/// `@unchecked Sendable`: the context is configured once in `init` and only read afterwards,
/// which OpenSSL allows from any thread.
public final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Whether this context is for the client side.
    public let isClient: Bool

    deinit { SSL_CTX_free(pointer) }

    /// A client context: verifies the server against the system trust store, or against
    /// `caFile` when given (the simulators' `ca.pem`); presents a client certificate when given
    /// (APNs certificate auth: PEM chain and key).
    public init(client caFile: String? = nil, clientCertificatePEM: String? = nil, clientKeyPEM: String? = nil,
                verifyPeer: Bool = true) throws(CryptoError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw CryptoError.openssl(.tlsContext, "SSL_CTX_new failed") }
        pointer = context
        isClient = true
        try configureCommon()
        if let caFile {
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw CryptoError.openssl(.tlsContext, "cannot load CA file \(caFile)")
            }
        } else {
            guard SSL_CTX_set_default_verify_paths(context) == 1 else { throw CryptoError.openssl(.tlsContext, "no system trust store") }
        }
        SSL_CTX_set_verify(context, verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        _ = herald_ssl_ctx_set_client_session_cache(context)
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
            throw CryptoError.openssl(.tlsContext, "cannot set ALPN")
        }
        if let clientCertificatePEM, let clientKeyPEM {
            try useCertificate(chainPEM: clientCertificatePEM, keyPEM: clientKeyPEM)
        }
    }

    /// A server context with a certificate chain and key; ALPN selects `h2` or fails the handshake.
    ///
    /// With `clientCertificateAuthorityPEM` (one or more PEM certificates) it asks every client
    /// for a certificate, as APNs does: a client may send none and still connect, but one the
    /// authority did not issue for client authentication fails the handshake.
    /// ``TLSStream/verifiedPeerSubject`` then says whom the certificate names.
    public init(serverCertificatePEM: String, keyPEM: String, clientCertificateAuthorityPEM: String? = nil) throws(CryptoError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw CryptoError.openssl(.tlsContext, "SSL_CTX_new failed") }
        pointer = context
        isClient = false
        try configureCommon()
        try useCertificate(chainPEM: serverCertificatePEM, keyPEM: keyPEM)
        if let clientCertificateAuthorityPEM { try requestClientCertificates(issuedBy: clientCertificateAuthorityPEM) }
        SSL_CTX_set_alpn_select_cb(context, { _, out, outLength, offered, offeredLength, _ in
            // Walk the client's list (length-prefixed names) looking for "h2".
            guard let offered, let out, let outLength else { return herald_tlsext_err_alert_fatal() }
            var index = 0
            while index < Int(offeredLength) {
                let length = Int(offered[index])
                if length == 2, index + 2 < Int(offeredLength), offered[index + 1] == UInt8(ascii: "h"), offered[index + 2] == UInt8(ascii: "2") {
                    out.pointee = offered + index + 1
                    outLength.pointee = 2
                    return herald_tlsext_err_ok()
                }
                index += 1 + length
            }
            return herald_tlsext_err_alert_fatal()
        }, nil)
    }

    private func configureCommon() throws(CryptoError) {
        guard herald_ssl_ctx_set_min_proto_version(pointer, herald_tls1_2_version()) == 1 else {
            throw CryptoError.openssl(.tlsContext, "cannot require TLS 1.2")
        }
        _ = herald_ssl_ctx_set_mode(pointer, herald_ssl_mode_partial_write())
    }

    private func requestClientCertificates(issuedBy authorityPEM: String) throws(CryptoError) {
        guard let store = SSL_CTX_get_cert_store(pointer) else { throw CryptoError.openssl(.tlsContext, "no certificate store") }
        let bio = try MemoryBIO(Array(authorityPEM.utf8))
        var count = 0
        while let authority = PEM_read_bio_X509(bio.pointer, nil, nil, nil) {
            defer { X509_free(authority) }
            // Both take their own reference (the store) or copy (the name in CertificateRequest).
            guard X509_STORE_add_cert(store, authority) == 1, SSL_CTX_add_client_CA(pointer, authority) == 1 else {
                throw CryptoError.openssl(.certificate, "cannot trust the client certificate authority")
            }
            count += 1
        }
        _ = drainOpenSSLErrors()  // the loop ends on a "no start line" error
        guard count > 0 else { throw CryptoError(.certificate, "the client certificate authority is not a PEM certificate") }
        // Without a session id context, a server that verifies clients fails every handshake
        // that offers to resume a session, and Herald's clients always offer one on reconnect.
        let sessionContext = Array("herald-client-certificate".utf8)
        guard SSL_CTX_set_session_id_context(pointer, sessionContext, UInt32(sessionContext.count)) == 1 else {
            throw CryptoError.openssl(.tlsContext, "cannot set the session id context")
        }
        // SSL_VERIFY_PEER alone: verify a certificate when one comes, go on without one
        // (SSL_VERIFY_FAIL_IF_NO_PEER_CERT would refuse token-auth clients).
        SSL_CTX_set_verify(pointer, SSL_VERIFY_PEER, nil)
    }

    private func useCertificate(chainPEM: String, keyPEM: String) throws(CryptoError) {
        let bio = try MemoryBIO(Array(chainPEM.utf8))
        guard let leaf = PEM_read_bio_X509(bio.pointer, nil, nil, nil) else {
            throw CryptoError.openssl(.certificate, "not a PEM certificate")
        }
        defer { X509_free(leaf) }
        guard SSL_CTX_use_certificate(pointer, leaf) == 1 else { throw CryptoError.openssl(.certificate, "certificate refused") }
        while let extra = PEM_read_bio_X509(bio.pointer, nil, nil, nil) {
            // SSL_CTX_add0_chain_cert takes ownership.
            if SSL_CTX_ctrl(pointer, SSL_CTRL_CHAIN_CERT, 0, UnsafeMutableRawPointer(extra)) != 1 { X509_free(extra) }
        }
        _ = drainOpenSSLErrors()  // the loop ends on a "no start line" error
        let key = try PrivateKey(pem: keyPEM)
        guard SSL_CTX_use_PrivateKey(pointer, key.pointer) == 1, SSL_CTX_check_private_key(pointer) == 1 else {
            throw CryptoError.openssl(.certificate, "the key does not match the certificate")
        }
    }
}

/// One TLS session over a non-blocking socket. Not thread-safe: used from its event loop only.
public final class TLSStream {
    private let ssl: OpaquePointer
    /// The context it came from (kept alive as long as the session).
    public let context: TLSContext

    /// What a non-blocking TLS call needs before it can go on.
    public enum Progress: Equatable {
        case done
        case wantRead
        case wantWrite
        /// The peer closed the TLS session cleanly.
        case closed
    }

    /// Wraps `fileDescriptor`. For a client, `serverName` is sent as SNI (for host names) and the
    /// certificate is checked against it (host name or IP address).
    public init(context: TLSContext, fileDescriptor: Int32, serverName: String?) throws(CryptoError) {
        guard let ssl = SSL_new(context.pointer) else { throw CryptoError.openssl(.tlsContext, "SSL_new failed") }
        self.ssl = ssl
        self.context = context
        guard SSL_set_fd(ssl, fileDescriptor) == 1 else { throw CryptoError.openssl(.tlsContext, "SSL_set_fd failed") }
        if context.isClient {
            if let serverName {
                let isIP = serverName.allSatisfy { $0.isNumber || $0 == "." } || serverName.contains(":")
                if isIP {
                    guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                        throw CryptoError.openssl(.tlsContext, "bad IP address \(serverName)")
                    }
                } else {
                    _ = herald_ssl_set_tlsext_host_name(ssl, serverName)
                    guard SSL_set1_host(ssl, serverName) == 1 else { throw CryptoError.openssl(.tlsContext, "bad host name") }
                }
            }
            SSL_set_connect_state(ssl)
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// Drives the handshake; call again when the socket is ready as asked.
    public func handshake() throws(CryptoError) -> Progress {
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        return try progress(result, .tlsHandshake, "TLS handshake failed")
    }

    /// The session to offer when reconnecting to the same server (TLS session resumption).
    public var session: TLSSession? {
        guard let session = SSL_get1_session(ssl) else { return nil }
        return TLSSession(pointer: session)
    }

    /// Offers `session` for resumption; call before the handshake.
    public func resume(_ session: TLSSession) {
        _ = SSL_set_session(ssl, session.pointer)
    }

    /// Whether the handshake resumed an earlier session (no full key exchange).
    public var resumed: Bool { SSL_session_reused(ssl) == 1 }

    /// The subject of the certificate the peer presented and this side verified, once the
    /// handshake is done (a resumed session keeps its first handshake's certificate). Nil when the
    /// peer presented none, which a server that only requests client certificates allows.
    public var verifiedPeerSubject: CertificateSubject? {
        guard let certificate = SSL_get0_peer_certificate(ssl), SSL_get_verify_result(ssl) == Int(X509_V_OK) else { return nil }
        return CertificateSubject(certificate: certificate)
    }

    /// The protocol ALPN selected (`h2`), or nil.
    public var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// Reads decrypted bytes into `buffer`; returns the count, or how to wait.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) -> (Int, Progress) {
        let result = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
        if result > 0 { return (Int(result), .done) }
        return (0, try progress(result, .tlsIO, "TLS read failed"))
    }

    /// Writes bytes; returns how many were taken (partial writes are enabled), or how to wait.
    public func write(_ buffer: UnsafeRawBufferPointer) throws(CryptoError) -> (Int, Progress) {
        guard buffer.count > 0 else { return (0, .done) }
        let result = SSL_write(ssl, buffer.baseAddress, Int32(buffer.count))
        if result > 0 { return (Int(result), .done) }
        return (0, try progress(result, .tlsIO, "TLS write failed"))
    }

    /// Bytes already decrypted and waiting inside OpenSSL.
    public var pendingBytes: Int { Int(SSL_pending(ssl)) }

    /// Sends close_notify (best effort).
    public func shutdown() {
        _ = SSL_shutdown(ssl)
        _ = drainOpenSSLErrors()
    }

    private func progress(_ result: Int32, _ code: CryptoError.Code, _ message: String) throws(CryptoError) -> Progress {
        let error = SSL_get_error(ssl, result)
        switch error {
        case herald_ssl_error_want_read(): return .wantRead
        case herald_ssl_error_want_write(): return .wantWrite
        case herald_ssl_error_zero_return(): return .closed
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != Int(X509_V_OK) {
                let reason = String(cString: X509_verify_cert_error_string(verify))
                _ = drainOpenSSLErrors()
                throw CryptoError(code, "\(message): certificate verification: \(reason)")
            }
            let errnoValue = errno
            let details = drainOpenSSLErrors()
            if details.isEmpty {
                if result == 0 { return .closed }
                throw CryptoError(code, "\(message): connection error (errno \(errnoValue))")
            }
            throw CryptoError(code, "\(message): \(details)")
        }
    }
}

/// A TLS session kept to resume later connections to the same server.
///
/// `@unchecked Sendable`: an `SSL_SESSION` is reference-counted by OpenSSL and not changed after
/// the handshake that made it; Herald only hands it to `SSL_set_session`.
public final class TLSSession: @unchecked Sendable {
    let pointer: OpaquePointer
    init(pointer: OpaquePointer) { self.pointer = pointer }
    deinit { SSL_SESSION_free(pointer) }
}
