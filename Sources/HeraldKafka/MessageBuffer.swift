/// A FIFO of messages with O(1) removal from the front.
struct MessageBuffer {
    private var storage: [KafkaMessage] = []
    private var head = 0

    var count: Int { storage.count - head }

    mutating func append(_ message: KafkaMessage) { storage.append(message) }

    mutating func popFirst() -> KafkaMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 4_096 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    /// Removes the messages `shouldRemove` selects; returns how many.
    mutating func removeAll(where shouldRemove: (KafkaMessage) -> Bool) -> Int {
        storage.removeFirst(head)
        head = 0
        let before = storage.count
        storage.removeAll(where: shouldRemove)
        return before - storage.count
    }
}

