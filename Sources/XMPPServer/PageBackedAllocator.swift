#if canImport(Glibc)
import Glibc
#endif
@_spi(CustomByteBufferAllocator) import NIOCore

/// The allocator NIOSSL's handler takes its two per-connection buffers from (the XMPP listeners set
/// it as the channel's allocator only while that handler is added): a buffer of 16 KiB or more gets
/// pages of its own (`mmap`), a smaller one comes from `malloc` as usual.
///
/// Why: NIOSSL gives every connection a 32 KiB read buffer and a 16 KiB write buffer for as long
/// as it lives, and an idle connection writes the first few hundred bytes of each. Taken from
/// malloc's heap, those buffers sat on pages that earlier, freed allocations (TLS handshakes) had
/// already made resident. With pages of their own, only the pages a buffer has written are resident.
///
/// A buffer keeps its kind when it grows (see `reallocate`), so a heap buffer never turns into a
/// mapping made and unmapped per use.
///
/// Every block starts with a 16-byte header (the kind of memory and, for a mapping, its length),
/// so `free`, `realloc` and `munmap` know what they hold; buffers stay 16-byte aligned.
public enum PageBackedAllocator {
    /// The size from which a buffer gets its own pages.
    public static let mappingThreshold = 16 * 1024

    public static let allocator = ByteBufferAllocator(
        allocate: { size in PageBackedAllocator.allocate(size) },
        reallocate: { pointer, oldSize, newSize in PageBackedAllocator.reallocate(pointer, oldSize, newSize) },
        deallocate: { pointer in PageBackedAllocator.deallocate(pointer) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) })

    private static let headerSize = 16
    private static let mallocTag = 0x6d61_6c6c
    private static let mappingTag = 0x6d6d_6170

    static func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        if size >= mappingThreshold {
            let length = roundedToPages(size + headerSize)
            #if canImport(Glibc)
            let base = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            if let base, base != MAP_FAILED {
                base.storeBytes(of: mappingTag, as: Int.self)
                base.storeBytes(of: length, toByteOffset: 8, as: Int.self)
                return base + headerSize
            }
            #endif
            // Out of mappings: the heap still serves the request.
        }
        guard let base = malloc(size + headerSize) else { return nil }
        base.storeBytes(of: mallocTag, as: Int.self)
        return base + headerSize
    }

    static func deallocate(_ pointer: UnsafeMutableRawPointer) {
        let base = pointer - headerSize
        if isMapped(pointer) {
            #if canImport(Glibc)
            munmap(base, base.load(fromByteOffset: 8, as: Int.self))
            #endif
        } else {
            free(base)
        }
    }

    /// A buffer keeps its kind when it grows: a mapped one (NIOSSL's, kept for the connection's
    /// life) moves to a larger mapping, a heap one stays on the heap. So a buffer that grows while it
    /// is built (a batch of deliveries) never turns into a mapping made and unmapped per write.
    static func reallocate(_ pointer: UnsafeMutableRawPointer?, _ oldSize: Int, _ newSize: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(newSize) }
        let base = pointer - headerSize
        guard isMapped(pointer) else {
            guard let grown = realloc(base, newSize + headerSize) else { return nil }
            return grown + headerSize
        }
        if newSize + headerSize <= base.load(fromByteOffset: 8, as: Int.self) { return pointer }
        guard let moved = allocate(max(newSize, mappingThreshold)) else { return nil }
        moved.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
        deallocate(pointer)
        return moved
    }

    /// Whether a block from this allocator has pages of its own.
    static func isMapped(_ pointer: UnsafeRawPointer) -> Bool {
        (pointer - headerSize).load(as: Int.self) == mappingTag
    }

    private static func roundedToPages(_ bytes: Int) -> Int {
        let page = pageSize
        return (bytes + page - 1) / page * page
    }

    static let pageSize: Int = {
        #if canImport(Glibc)
        return Int(sysconf(Int32(_SC_PAGESIZE)))
        #else
        return 4096
        #endif
    }()
}
