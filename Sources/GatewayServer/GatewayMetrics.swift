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
        deviceSyncs = registry.makeCounter(descriptor: Self.name("device_syncs", unit: "total", "Sync calls (pulls and pushes) by enrolled devices."))
        pulls = registry.makeCounter(descriptor: Self.name("pulls", unit: "total", "Pull pages answered."))
        pushes = registry.makeCounter(descriptor: Self.name("pushes", unit: "total", "Device pushes merged."))
        outboxQueued = registry.makeGauge(descriptor: Self.name("outbox_queued", "Outcome versions waiting to go to the EHR."))
        outboxPushed = registry.makeGauge(descriptor: Self.name("outbox_pushed", "Outcome versions the EHR holds."))
        outboxDead = registry.makeGauge(descriptor: Self.name("outbox_dead_letters", "Outcome versions the EHR refused for good."))
        ehrPushed = registry.makeCounter(descriptor: Self.name("ehr_pushed", unit: "total", "Outcome versions the push worker delivered to the EHR."))
        ehrDeadLetters = registry.makeCounter(descriptor: Self.name("ehr_dead_lettered", unit: "total", "Outcome versions the EHR refused (dead letters)."))
        ehrRefreshes = registry.makeCounter(descriptor: Self.name("ehr_refreshes", unit: "total", "Patient refreshes from the EHR (pulled or found unchanged)."))
        notifications = registry.makeCounter(descriptor: Self.name("ehr_notifications", unit: "total", "Rest-hook notifications accepted from the EHR."))
    }

    /// A metric's full name, `caregate_<metric>[_<unit>]`, with its help line.
    static func name(_ metric: String, unit: String = "", _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "caregate", metricName: metric, unitName: unit, helpText: help)
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
