internal import COpenSSL
import Glibc

/// The names a server certificate is valid for: the DNS names and IP addresses of its
/// subjectAltName, in the forms clients compare (DNS names lower-cased, IP addresses as
/// `inet_ntop` writes them), so two sets of names compare equal when clients would accept both.
public struct CertificateNames: Sendable, Hashable, CustomStringConvertible {
    public private(set) var dnsNames: Set<String> = []
    public private(set) var ipAddresses: Set<String> = []

    /// 127.0.0.1 and localhost: what a server on the loopback interface is reached by.
    public static let loopback = CertificateNames(checked: ["localhost"], ["127.0.0.1"])

    /// No names.
    public init() {}

    private init(checked dnsNames: Set<String>, _ ipAddresses: Set<String>) {
        self.dnsNames = dnsNames
        self.ipAddresses = ipAddresses
    }

    /// Sorts each of `names` into an IP address (IPv4 or IPv6) or a DNS name (letters, digits,
    /// `-` and `_` in dot-separated labels); anything else is refused, since the names end up in
    /// an OpenSSL extension string where a comma or colon would add names nobody asked for.
    public init(_ names: [String]) throws(CryptoError) {
        for name in names {
            if let address = Self.canonicalIPAddress(name) {
                ipAddresses.insert(address)
            } else if Self.isDNSName(name) {
                dnsNames.insert(name.lowercased())
            } else {
                throw CryptoError(.certificate, "not a DNS name or IP address: \(name.debugDescription)")
            }
        }
    }

    /// The subjectAltName of the first certificate in `pem` (no names when it has none).
    public init(certificatePEM pem: String) throws(CryptoError) {
        self = try withPEMCertificate(pem) { certificate throws(CryptoError) in CertificateNames(certificate: certificate) }
    }

    /// The subjectAltName of an `X509` the caller keeps owning.
    init(certificate: OpaquePointer) {
        guard let extensionValue = X509_get_ext_d2i(certificate, NID_subject_alt_name, nil, nil) else {
            _ = drainOpenSSLErrors()
            return
        }
        let names = OpaquePointer(extensionValue)
        defer { GENERAL_NAMES_free(names) }
        for index in 0..<herald_general_names_count(names) {
            guard let name = herald_general_names_value(names, index) else { continue }
            switch name.pointee.type {
            case GEN_DNS:
                guard let value = name.pointee.d.dNSName else { continue }
                dnsNames.insert(String(decoding: Self.bytes(value), as: UTF8.self).lowercased())
            case GEN_IPADD:
                guard let value = name.pointee.d.iPAddress, let address = Self.text(ofAddress: Self.bytes(value)) else { continue }
                ipAddresses.insert(address)
            default:
                continue
            }
        }
    }

    /// Whether every name of `other` is among these.
    public func contains(_ other: CertificateNames) -> Bool {
        dnsNames.isSuperset(of: other.dnsNames) && ipAddresses.isSuperset(of: other.ipAddresses)
    }

    /// These names and those of `other`.
    public func union(_ other: CertificateNames) -> CertificateNames {
        CertificateNames(checked: dnsNames.union(other.dnsNames), ipAddresses.union(other.ipAddresses))
    }

    /// The names of `other` that are not among these.
    public func subtracting(_ other: CertificateNames) -> CertificateNames {
        CertificateNames(checked: dnsNames.subtracting(other.dnsNames), ipAddresses.subtracting(other.ipAddresses))
    }

    public var isEmpty: Bool { dnsNames.isEmpty && ipAddresses.isEmpty }

    /// IP addresses, then DNS names, each sorted: `127.0.0.1, localhost, sim`.
    public var description: String { (ipAddresses.sorted() + dnsNames.sorted()).joined(separator: ", ") }

    /// The subjectAltName value OpenSSL's configuration syntax takes (`DNS:a,IP:b`).
    var subjectAltName: String {
        (dnsNames.sorted().map { "DNS:\($0)" } + ipAddresses.sorted().map { "IP:\($0)" }).joined(separator: ",")
    }

    private static func bytes(_ string: UnsafeMutablePointer<ASN1_STRING>) -> [UInt8] {
        guard let data = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(string))))
    }

    static func canonicalIPAddress(_ text: String) -> String? {
        var address = in6_addr()
        for family in [AF_INET, AF_INET6] where inet_pton(family, text, &address) == 1 {
            return withUnsafeBytes(of: address) { Self.text(ofAddress: Array($0.prefix(family == AF_INET ? 4 : 16))) }
        }
        return nil
    }

    private static func text(ofAddress bytes: [UInt8]) -> String? {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written = bytes.withUnsafeBytes { inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func isDNSName(_ name: String) -> Bool {
        // A last label of digits only would be a mistyped IPv4 address (no top-level domain is numeric).
        guard !name.isEmpty, name.utf8.count <= 253, !(name.split(separator: ".").last ?? "").allSatisfy(\.isNumber) else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && label.first != "-" && label.last != "-"
                && label.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") }
        }
    }
}
