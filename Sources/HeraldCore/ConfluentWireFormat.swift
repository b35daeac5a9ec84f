/// Values written by Confluent's serializers (the JSON Schema serializer among them): a magic
/// byte 0, the schema's id in the registry as 4 bytes big-endian, then the JSON. Herald reads
/// such jobs and device events as it reads plain JSON. A JSON text never starts with byte 0,
/// so the two cannot be confused; Herald does not ask the registry anything (its own schemas
/// decide, `schemas/`).
public enum ConfluentWireFormat {
    /// The magic byte that starts a framed value.
    public static let magicByte: UInt8 = 0
    /// Magic byte and schema id.
    public static let headerBytes = 5

    /// The JSON of `bytes` and the registry schema id when they are framed; plain JSON is
    /// returned whole with no id. A value that starts with byte 0 but is too short for the
    /// header is returned whole, and fails as JSON.
    public static func unwrap<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> (json: Bytes.SubSequence, schemaID: UInt32?) {
        guard bytes.first == magicByte, bytes.count >= headerBytes else { return (bytes[...], nil) }
        var id: UInt32 = 0
        var index = bytes.index(after: bytes.startIndex)
        for _ in 0..<4 {
            id = id << 8 | UInt32(bytes[index])
            index = bytes.index(after: index)
        }
        return (bytes[index...], id)
    }
}
