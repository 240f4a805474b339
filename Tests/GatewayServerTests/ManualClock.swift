import Synchronization

/// A clock the test moves by hand. A sleeper wakes when the clock is advanced to its deadline,
/// so the push worker's back-off over minutes of an EHR outage runs in a moment of real time.
final class ManualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let id: Int
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var cancelled: Set<Int> = []
        var nextID = 0
        /// Every sleep asked for, as (when it was asked, for how long).
        var asked: [(at: Duration, duration: Duration)] = []
    }

    private let state = Mutex(State())

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }
    var sleeping: Int { state.withLock { $0.sleepers.count } }
    var asked: [(at: Duration, duration: Duration)] { state.withLock { $0.asked } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let answer: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    state.asked.append((state.now.offset, state.now.duration(to: deadline)))
                    if deadline <= state.now { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return nil
                }
                if let answer { continuation.resume(with: answer) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)  // cancelled before it slept: it will not
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Waits (in real time) until `count` sleepers have slept undisturbed for a moment, then
    /// moves the clock to the earliest deadline and wakes whoever it was due for. Returns the
    /// new time, or nil when the sleepers never settled.
    @discardableResult
    func advanceToNextDeadline(whenSleeping count: Int) async throws -> Duration? {
        var settled = 0
        for _ in 0..<1_000 where settled < 5 {
            settled = sleeping == count ? settled + 1 : 0
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        guard settled >= 5 else { return nil }
        let due = state.withLock { state -> [Sleeper] in
            guard let earliest = state.sleepers.map(\.deadline).min() else { return [] }
            state.now = earliest
            let due = state.sleepers.filter { $0.deadline <= earliest }
            state.sleepers.removeAll { $0.deadline <= earliest }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
        return now.offset
    }
}
