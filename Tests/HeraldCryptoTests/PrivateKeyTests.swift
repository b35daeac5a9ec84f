import HeraldCrypto
import Testing

@Suite struct PrivateKeyTests {
    @Test func publicKeyDERIsTheSubjectPublicKeyInfo() throws {
        let key = try PrivateKey.generate(.ecP256)
        let der = try key.publicKeyDER()
        // SEQUENCE (89 bytes) { id-ecPublicKey, prime256v1 }, BIT STRING of an uncompressed point.
        #expect(der.count == 91)
        #expect(Array(der.prefix(2)) == [0x30, 0x59])
        #expect(der[26] == 0x04, "uncompressed point")
        // The same key read back from its PEM has the same public half; another key does not.
        #expect(try PrivateKey(pem: try key.pkcs8PEM()).publicKeyDER() == der)
        #expect(try PrivateKey.generate(.ecP256).publicKeyDER() != der)
        #expect(try PrivateKey.generate(.rsa(bits: 2048)).publicKeyDER().count == 294)
    }
}
