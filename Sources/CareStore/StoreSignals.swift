import Foundation

/// What one gateway tells every other gateway over the same store.
public enum StoreSignal: String, Sendable, CaseIterable {
    /// Outcomes were written that the EHR does not have yet: push workers, wake up.
    case outcomesWritten = "caregate_outcomes_written"
}

/// Signals between gateways over one store (PostgreSQL's `LISTEN`/`NOTIFY`): a device's push
/// landing on one instance wakes every instance's push worker, so outcomes leave within a
/// second wherever the push landed. A store one process owns (SQLite) needs none.
public protocol StoreSignals: Sendable {
    /// Tells every gateway listening on this store, this one included.
    func announce(_ signal: StoreSignal) throws(StoreError)
    /// Calls `heard` for each announcement of `signal` by any gateway over the store until the
    /// task is cancelled; a lost connection is opened again (and `heard` called once, for what
    /// may have been missed meanwhile).
    func listen(_ signal: StoreSignal, heard: @escaping @Sendable () -> Void) async
}
