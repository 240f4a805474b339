import CareStore
import Foundation
import Metrics
import Prometheus

/// What `/metrics` reports, in Prometheus' text format: Hummingbird's request counts and latency
/// histograms (through swift-metrics), device syncs and pulls, and the outbox read at each scrape.
/// swift-metrics has one factory per process, so one registry serves every server in it.
public final class GatewayMetrics: Sendable {
    public static let shared = GatewayMetrics()

    public let registry: PrometheusCollectorRegistry
    let deviceSyncs: Prometheus.Counter
    let pulls: Prometheus.Counter
    let pushes: Prometheus.Counter
    let outboxQueued: Prometheus.Gauge
    let outboxPushed: Prometheus.Gauge
    let outboxDead: Prometheus.Gauge
    let ehrPushed: Prometheus.Counter
    let ehrDeadLetters: Prometheus.Counter
    let ehrRefreshes: Prometheus.Counter
    let notifications: Prometheus.Counter

    private init() {
        registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        deviceSyncs = registry.makeCounter(name: "caregate_device_syncs_total", help: "Sync calls (pulls and pushes) by enrolled devices.")
        pulls = registry.makeCounter(name: "caregate_pulls_total", help: "Pull pages answered.")
        pushes = registry.makeCounter(name: "caregate_pushes_total", help: "Device pushes merged.")
        outboxQueued = registry.makeGauge(name: "caregate_outbox_queued", help: "Outcome versions waiting to go to the EHR.")
        outboxPushed = registry.makeGauge(name: "caregate_outbox_pushed", help: "Outcome versions the EHR holds.")
        outboxDead = registry.makeGauge(name: "caregate_outbox_dead_letters", help: "Outcome versions the EHR refused for good.")
        ehrPushed = registry.makeCounter(name: "caregate_ehr_pushed_total", help: "Outcome versions the push worker delivered to the EHR.")
        ehrDeadLetters = registry.makeCounter(name: "caregate_ehr_dead_lettered_total", help: "Outcome versions the EHR refused (dead letters).")
        ehrRefreshes = registry.makeCounter(name: "caregate_ehr_refreshes_total", help: "Patient refreshes from the EHR (pulled or found unchanged).")
        notifications = registry.makeCounter(name: "caregate_ehr_notifications_total", help: "Rest-hook notifications accepted from the EHR.")
    }

    /// The text of a scrape, with the outbox read now.
    func scrape(_ outbox: any Outbox) -> [UInt8] {
        if let counts = try? outbox.outboxCounts() {
            outboxQueued.set(Double(counts.queued))
            outboxPushed.set(Double(counts.pushed))
            outboxDead.set(Double(counts.failed))
        }
        return registry.emitToBuffer()
    }
}
