public import Foundation
public import HeraldCrypto

/// The files a simulator's state directory holds, so that any client can trust it and
/// authenticate to it: `ca.pem` + `ca-key.pem` (the CA clients trust), `server.pem` +
/// `server-key.pem` (its TLS identity, for 127.0.0.1, localhost and the names asked for),
/// `apns-key.p8` + `apns.json` (`key_id`, `team_id`, `bundle_id`), `apns-client.pem` +
/// `apns-client-key.pem` + `apns-client.p12` (an APNs client certificate for the bundle, signed
/// by the CA, for certificate auth) and `fcm-service-account.json` (whose `token_uri` points at
/// the simulator). Existing files are kept, so a restarted simulator is trusted by clients that
/// already read them; any tool that writes the same files (another simulator, a real app's
/// credentials) is interchangeable.
public struct SimulatorCredentials: Sendable {
    public let directory: URL
    public let caCertificatePEM: String
    public let serverCertificatePEM: String
    public let serverKeyPEM: String
    /// APNs token-auth key and its identity.
    public let apnsKey: PrivateKey
    public let apnsKeyID: String
    public let teamID: String
    public let bundleID: String
    /// APNs certificate auth: a client certificate for `bundleID` (subject UID) signed by the CA,
    /// and its PKCS#8 key, as in ``apnsClientCertificateFile`` and ``apnsClientKeyFile``.
    public let apnsClientCertificatePEM: String
    public let apnsClientKeyPEM: String
    /// The FCM service account's signing key, project and identity.
    public let fcmKey: PrivateKey
    public let fcmProjectID: String
    public let fcmClientEmail: String
    public let fcmTokenURI: String
    /// What ``prepare(directory:fcmPort:publicHost:certificateNames:)`` did to the TLS files.
    public let certificateUpdate: CertificateUpdate

    /// What became of the CA and the server certificate when the state directory was prepared.
    public enum CertificateUpdate: Sendable, Equatable {
        /// Both were there, and the server certificate names everything asked for.
        case kept
        /// There were none: a new CA and server certificate.
        case created
        /// The server certificate lacked a name: a new one signed by the same CA, so clients
        /// that trust `ca.pem` accept it.
        case serverCertificateReissued(added: CertificateNames)
        /// The server certificate lacked a name and the directory has no `ca-key.pem` (older
        /// simulators did not keep it): a new CA too. Clients must read `ca.pem` again.
        case authorityReplaced(added: CertificateNames)
        /// The APNs client certificate was missing and the directory has no `ca-key.pem` to sign
        /// one: a new CA, and a server certificate with the same names from it. Clients must
        /// read `ca.pem` again.
        case authorityReplacedForClientCertificate

        /// Whether `ca.pem` is new, so clients that loaded the old one no longer trust the simulator.
        public var changesAuthority: Bool {
            switch self {
            case .kept, .serverCertificateReissued: false
            case .created, .authorityReplaced, .authorityReplacedForClientCertificate: true
            }
        }
    }

    /// The APNs client certificate's file in the state directory (PEM).
    public static let apnsClientCertificateFile = "apns-client.pem"
    /// Its private key's file (PKCS#8 PEM, mode 0600).
    public static let apnsClientKeyFile = "apns-client-key.pem"
    /// Both as PKCS#12 (mode 0600), as Apple's portal and Keychain hand them out, protected by
    /// ``apnsClientPKCS12Password``.
    public static let apnsClientPKCS12File = "apns-client.p12"
    /// The `.p12` file's password. A fixed, documented one: tools open the file unattended, and
    /// the file's mode, not the password, keeps the key from other users.
    public static let apnsClientPKCS12Password = "herald-sim"

    /// Where ``apnsClientCertificateFile`` is.
    public var apnsClientCertificateURL: URL { directory.appendingPathComponent(Self.apnsClientCertificateFile) }
    /// Where ``apnsClientKeyFile`` is.
    public var apnsClientKeyURL: URL { directory.appendingPathComponent(Self.apnsClientKeyFile) }
    /// Where ``apnsClientPKCS12File`` is.
    public var apnsClientPKCS12URL: URL { directory.appendingPathComponent(Self.apnsClientPKCS12File) }

    /// Why a state directory could not be read or written.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Loads `directory`, creating whatever is missing. `publicHost` (a DNS name or IPv4
    /// address) and `fcmPort` decide the service account's `token_uri`; an existing file with
    /// another host or port is rewritten with the same key. The server certificate names
    /// 127.0.0.1, localhost, `publicHost` and `certificateNames`; one that lacks any of them is
    /// signed again by the same CA when `ca-key.pem` is there (see ``CertificateUpdate``). The
    /// APNs client certificate is signed again when the CA is new or `apns.json` names another
    /// bundle; a missing `.p12` is written from the kept certificate and key.
    public static func prepare(directory: URL, fcmPort: Int, publicHost: String = "127.0.0.1",
                               certificateNames: CertificateNames = CertificateNames()) throws(Failure) -> SimulatorCredentials {
        // Not IPv6: it would need brackets in the URL, and HERALD_FCM_TOKEN_HOSTS matches hosts as written.
        guard !publicHost.contains(":"), let publicName = try? CertificateNames([publicHost]) else {
            throw Failure(message: "the public host must be a DNS name or an IPv4 address, not \(publicHost.debugDescription)")
        }
        let serverNames = CertificateNames.loopback.union(certificateNames).union(publicName)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = { (name: String) in directory.appendingPathComponent(name) }
            func read(_ name: String) -> String? { try? String(contentsOf: file(name), encoding: .utf8) }
            func write(_ name: String, _ bytes: [UInt8], secret: Bool = false) throws {
                try Data(bytes).write(to: file(name), options: .atomic)
                if secret { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file(name).path) }
            }
            func write(_ name: String, _ text: String, secret: Bool = false) throws { try write(name, Array(text.utf8), secret: secret) }

            // The APNs identity first: the client certificate names its bundle.
            let apnsKey: PrivateKey
            if let pem = read("apns-key.p8") {
                apnsKey = try PrivateKey(pem: pem)
            } else {
                apnsKey = try PrivateKey.generate(.ecP256)
                try write("apns-key.p8", try apnsKey.pkcs8PEM(), secret: true)
            }
            var apnsInfo = (try? JSONSerialization.jsonObject(with: Data(contentsOf: file("apns.json")))) as? [String: Any] ?? [:]
            if apnsInfo["key_id"] == nil || apnsInfo["team_id"] == nil || apnsInfo["bundle_id"] == nil {
                apnsInfo = ["key_id": randomID(10), "team_id": randomID(10), "bundle_id": "dev.herald.demo"]
                try write("apns.json", String(decoding: try JSONSerialization.data(withJSONObject: apnsInfo, options: [.sortedKeys, .prettyPrinted]), as: UTF8.self) + "\n")
            }
            guard let keyID = apnsInfo["key_id"] as? String, let teamID = apnsInfo["team_id"] as? String,
                  let bundleID = apnsInfo["bundle_id"] as? String
            else { throw Failure(message: "the state directory \(directory.path) holds incomplete credentials") }

            var ca = read("ca.pem")
            var serverCertificate = read("server.pem")
            var serverKey = read("server-key.pem")
            let caKey = read("ca-key.pem")
            var clientCertificate = read(apnsClientCertificateFile)
            var clientKey = read(apnsClientKeyFile)
            // One for another bundle (apns.json was edited), or unreadable, is replaced.
            let clientCertificateFits = clientKey != nil
                && clientCertificate.flatMap { try? CertificateSubject(certificatePEM: $0) }?.uid == bundleID
            var certificateUpdate = CertificateUpdate.kept
            var authority: CertificateAuthority?
            if ca == nil || serverCertificate == nil || serverKey == nil {
                certificateUpdate = .created
                authority = try CertificateAuthority.generate(serverNames: serverNames)
            } else {
                // A certificate that cannot be read names nothing, and is replaced.
                let stored = serverCertificate.flatMap { try? CertificateNames(certificatePEM: $0) } ?? CertificateNames()
                if !stored.contains(serverNames) {
                    let added = serverNames.subtracting(stored)
                    if let ca, let caKey,
                       let reissued = try? CertificateAuthority.reissue(caCertificatePEM: ca, caKeyPEM: caKey, serverNames: serverNames) {
                        certificateUpdate = .serverCertificateReissued(added: added)
                        authority = reissued
                    } else {
                        certificateUpdate = .authorityReplaced(added: added)
                        authority = try CertificateAuthority.generate(serverNames: serverNames)
                    }
                } else if !clientCertificateFits && caKey == nil {
                    // Only a new CA can sign it; its server certificate keeps every name the old one had.
                    certificateUpdate = .authorityReplacedForClientCertificate
                    authority = try CertificateAuthority.generate(serverNames: stored.union(serverNames))
                }
            }
            if let authority {
                // Otherwise ca.pem stays byte for byte what clients loaded.
                if certificateUpdate.changesAuthority {
                    // The key first: a CA certificate without its key could never sign again.
                    try write("ca-key.pem", authority.caKeyPEM, secret: true)
                    try write("ca.pem", authority.caCertificatePEM)
                    ca = authority.caCertificatePEM
                }
                try write("server-key.pem", authority.serverKeyPEM, secret: true)
                try write("server.pem", authority.serverCertificatePEM)
                (serverCertificate, serverKey) = (authority.serverCertificatePEM, authority.serverKeyPEM)
            }

            // A new CA no longer trusts the old client certificate.
            if certificateUpdate.changesAuthority || !clientCertificateFits {
                guard let ca, let signingKey = authority?.caKeyPEM ?? caKey else {
                    throw Failure(message: "the state directory \(directory.path) has no ca-key.pem to sign the APNs client certificate")
                }
                let issued = try CertificateAuthority.issueAPNsClientCertificate(bundleID: bundleID, caCertificatePEM: ca, caKeyPEM: signingKey)
                try write(apnsClientKeyFile, issued.keyPEM, secret: true)
                try write(apnsClientCertificateFile, issued.certificatePEM)
                try write(apnsClientPKCS12File, try pkcs12(issued, bundleID: bundleID), secret: true)
                (clientCertificate, clientKey) = (issued.certificatePEM, issued.keyPEM)
            } else if let clientCertificate, let clientKey, !FileManager.default.fileExists(atPath: file(apnsClientPKCS12File).path) {
                let kept = IssuedCertificate(certificatePEM: clientCertificate, keyPEM: clientKey)
                try write(apnsClientPKCS12File, try pkcs12(kept, bundleID: bundleID), secret: true)
            }

            let tokenURI = "https://\(publicHost):\(fcmPort)/token"
            var account = (try? JSONSerialization.jsonObject(with: Data(contentsOf: file("fcm-service-account.json")))) as? [String: Any] ?? [:]
            let fcmKey: PrivateKey
            if let pem = account["private_key"] as? String, let key = try? PrivateKey(pem: pem) {
                fcmKey = key
            } else {
                fcmKey = try PrivateKey.generate(.rsa(bits: 2048))
                account = [
                    "type": "service_account", "project_id": "herald-sim", "private_key_id": randomID(40).lowercased(),
                    "private_key": try fcmKey.pkcs8PEM(), "client_email": "herald-sim@herald-sim.iam.gserviceaccount.com",
                    "client_id": "100000000000000000000", "auth_uri": "https://127.0.0.1/auth",
                ]
            }
            if account["token_uri"] as? String != tokenURI {
                account["token_uri"] = tokenURI
                try write("fcm-service-account.json",
                          String(decoding: try JSONSerialization.data(withJSONObject: account, options: [.sortedKeys, .prettyPrinted]), as: UTF8.self) + "\n",
                          secret: true)
            }
            guard let ca, let serverCertificate, let serverKey, let clientCertificate, let clientKey,
                  let projectID = account["project_id"] as? String, let clientEmail = account["client_email"] as? String
            else { throw Failure(message: "the state directory \(directory.path) holds incomplete credentials") }
            return SimulatorCredentials(directory: directory, caCertificatePEM: ca, serverCertificatePEM: serverCertificate, serverKeyPEM: serverKey,
                                        apnsKey: apnsKey, apnsKeyID: keyID, teamID: teamID, bundleID: bundleID,
                                        apnsClientCertificatePEM: clientCertificate, apnsClientKeyPEM: clientKey, fcmKey: fcmKey,
                                        fcmProjectID: projectID, fcmClientEmail: clientEmail, fcmTokenURI: tokenURI,
                                        certificateUpdate: certificateUpdate)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(message: "cannot prepare the state directory \(directory.path): \(error)")
        }
    }

    /// The `.p12` form of an APNs client certificate, named as Keychain names Apple's.
    private static func pkcs12(_ certificate: IssuedCertificate, bundleID: String) throws(CryptoError) -> [UInt8] {
        try certificate.pkcs12(password: apnsClientPKCS12Password, friendlyName: "Apple Push Services: \(bundleID)")
    }

    /// An APNs provider token for this key, issued at `issuedAt` (epoch seconds).
    public func apnsProviderToken(issuedAt: Int64 = Int64(Date().timeIntervalSince1970)) throws(CryptoError) -> String {
        try JWT.sign(header: #"{"alg":"ES256","kid":"\#(apnsKeyID)"}"#, claims: #"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#, key: apnsKey)
    }

    static func randomID(_ length: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
    }
}
