#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Testing
@testable import XMPPServer

/// The device connections' allocator: NIOSSL-sized buffers get pages of their own, everything else
/// stays on the heap, and contents survive growth and copy-on-write either way.
@Suite struct PageBackedAllocatorTests {
    let allocator = PageBackedAllocator.allocator

    /// Whether the buffer's storage (from its first byte: `withVeryUnsafeBytes`) is a mapping.
    private func isMapped(_ buffer: ByteBuffer) -> Bool {
        buffer.withVeryUnsafeBytes { PageBackedAllocator.isMapped($0.baseAddress!) }
    }

    @Test func aBufferAllocatedAtTheThresholdIsMappedAndASmallOneIsNot() {
        var big = allocator.buffer(capacity: 2 * 16384)
        var small = allocator.buffer(capacity: 512)
        big.writeString("record")
        small.writeString("stanza")
        #expect(isMapped(big))
        #expect(!isMapped(small))
        #expect(big.readString(length: 6) == "record")
        #expect(small.readString(length: 6) == "stanza")
    }

    @Test func onlyThePagesWrittenAreResident() throws {
        var buffer = allocator.buffer(capacity: 2 * 16384)
        buffer.writeRepeatingByte(0x41, count: 100)
        let resident = buffer.withVeryUnsafeBytes { bytes -> Int in
            let page = PageBackedAllocator.pageSize
            // The mapping starts at the page holding the block's header, just before the bytes.
            let start = UnsafeMutableRawPointer(mutating: bytes.baseAddress! - 16)
            let pages = (bytes.count + 16 + page - 1) / page
            var vector = [UInt8](repeating: 0, count: pages)
            #expect(mincore(start, pages * page, &vector) == 0)
            return vector.filter { $0 & 1 == 1 }.count
        }
        #expect(resident == 1)
    }

    @Test func aHeapBufferThatGrowsStaysOnTheHeapWithItsBytes() {
        var buffer = allocator.buffer(capacity: 256)
        var expected: [UInt8] = []
        for i in 0..<3000 {
            let chunk = [UInt8](repeating: UInt8(i % 251), count: 37)
            buffer.writeBytes(chunk)
            expected += chunk
        }
        #expect(buffer.capacity >= 3000 * 37)
        #expect(!isMapped(buffer))
        #expect(buffer.readBytes(length: expected.count) == expected)
    }

    @Test func aMappedBufferThatGrowsPastItsMappingMovesWithItsBytes() {
        var buffer = allocator.buffer(capacity: 16384)
        let expected = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        buffer.writeBytes(expected)
        #expect(isMapped(buffer))
        #expect(buffer.readBytes(length: expected.count) == expected)
    }

    @Test func copyOnWriteKeepsBothCopies() {
        var first = allocator.buffer(capacity: 32768)
        first.writeString("shared")
        var second = first
        second.writeString(" and changed")
        #expect(first.getString(at: 0, length: first.readableBytes) == "shared")
        #expect(second.getString(at: 0, length: second.readableBytes) == "shared and changed")
    }
}
