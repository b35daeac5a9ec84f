import HeraldCrypto
import Testing

@Suite struct AESGCMTests {
    private func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    /// NIST GCM test vector (gcmEncryptExtIV256.rsp, Count 0 with 128-bit plaintext).
    @Test func matchesAKnownVector() throws {
        let key = try AESGCMKey(bytes: bytes("31bdadd96698c204aa9ce1448ea94ae1fb4a9a0b3c9d773b51bb1822666b8f22"))
        let sealed = try AESGCM.seal(bytes("2db5168e932556f8089a0622981d017d"), key: key, nonce: bytes("0d18e06c7c725ac9e362e1ce"))
        #expect(Hex.encode(sealed.dropFirst(12)) == "fa4362189661d163fcd6a56d8bf0405a" + "d636ac1bbedd5cc3ee727dc2ab4a9489")
    }

    @Test func roundTripsAndRefusesWrongKeyTamperingAndOtherBinding() throws {
        let key = try AESGCMKey(bytes: try SecureRandom.bytes(32))
        let other = try AESGCMKey(bytes: try SecureRandom.bytes(32))
        let secret = Array("-----BEGIN PRIVATE KEY-----\nabc\n".utf8)
        let sealed = try AESGCM.seal(secret, key: key, associatedData: Array("app:a".utf8))
        #expect(sealed.count == secret.count + 28)
        #expect(try AESGCM.open(sealed, key: key, associatedData: Array("app:a".utf8)) == secret)
        #expect(try AESGCM.seal(secret, key: key) != AESGCM.seal(secret, key: key), "a fresh nonce every time")
        for attempt in [
            { try AESGCM.open(sealed, key: other, associatedData: Array("app:a".utf8)) },
            { try AESGCM.open(sealed, key: key, associatedData: Array("app:b".utf8)) },
            { var altered = sealed; altered[20] ^= 1; return try AESGCM.open(altered, key: key, associatedData: Array("app:a".utf8)) },
            { try AESGCM.open(Array(sealed.prefix(20)), key: key) },
        ] as [() throws -> [UInt8]] {
            #expect { try attempt() } throws: { error in (error as? AESGCMError)?.code == .authenticationFailed }
        }
    }

    @Test func keysMustBe32BytesOfBase64() throws {
        _ = try AESGCMKey(base64: "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=")
        #expect(throws: AESGCMError.self) { try AESGCMKey(base64: "c2hvcnQ=") }
        #expect(throws: AESGCMError.self) { try AESGCMKey(base64: "not base64!") }
    }
}
