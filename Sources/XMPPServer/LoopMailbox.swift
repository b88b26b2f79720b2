import Locking
import NIOCore

/// Work for one event loop from other threads, run in batches: the first item posted to an empty
/// mailbox schedules one task that runs everything posted until then, then flushes every connection
/// written to. Under load, a store commit that answers hundreds of messages costs each loop one wake-up
/// and each connection one flush (one TLS write), not one of each per message.
public final class LoopMailbox: @unchecked Sendable {  // `local` is touched on `loop` only
    public typealias Work = @Sendable () -> Void

    let loop: any EventLoop
    private let inbox = Locked<[Work]>([])
    private let localState = LocalState()

    final class LocalState {
        /// Swapped with the inbox, so that neither array is reallocated per batch.
        var spare: [Work] = []
        var draining = false
        var flushScheduled = false
        var dirty: [XMPPConnectionHandler] = []
    }

    init(loop: any EventLoop) {
        self.loop = loop
    }

    private var local: LocalState {
        loop.assertInEventLoop()
        return localState
    }

    /// Runs `work` on the loop soon, in order with everything else posted here.
    public func post(_ work: @escaping Work) {
        let first = inbox.withLock { items -> Bool in
            items.append(work)
            return items.count == 1
        }
        if first { loop.execute { self.drain() } }
    }

    private func drain() {
        let state = local
        state.draining = true
        while true {
            var batch = state.spare
            inbox.withLock { swap(&$0, &batch) }
            if batch.isEmpty { state.spare = batch; break }
            for work in batch { work() }
            batch.removeAll(keepingCapacity: true)
            state.spare = batch
        }
        state.draining = false
        flushDirty()
    }

    /// On the loop: `handler` has written; flush it once this batch (or this turn) is done.
    func needsFlush(_ handler: XMPPConnectionHandler) {
        let state = local
        if !handler.flushPending {
            handler.flushPending = true
            state.dirty.append(handler)
        }
        if !state.draining && !state.flushScheduled {
            state.flushScheduled = true
            loop.execute { self.flushDirty() }
        }
    }

    private func flushDirty() {
        let state = local
        state.flushScheduled = false
        let dirty = state.dirty
        state.dirty.removeAll(keepingCapacity: true)
        for handler in dirty {
            handler.flushPending = false
            handler.flushOutput()
        }
    }
}

/// One mailbox per event loop of a group, shared by every listener on it.
public final class LoopMailboxes: Sendable {
    private let byLoop: [ObjectIdentifier: LoopMailbox]

    public init(group: any EventLoopGroup) {
        var map: [ObjectIdentifier: LoopMailbox] = [:]
        for loop in group.makeIterator() { map[ObjectIdentifier(loop)] = LoopMailbox(loop: loop) }
        byLoop = map
    }

    func mailbox(for loop: any EventLoop) -> LoopMailbox {
        byLoop[ObjectIdentifier(loop)] ?? LoopMailbox(loop: loop)
    }
}
