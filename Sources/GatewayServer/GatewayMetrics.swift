import CareStore
import Foundation
import Metrics
import Prometheus

/// What `/metrics` reports, in Prometheus' text format: Hummingbird's request counts and latency
/// histograms (through swift-metrics), device syncs and pulls, and the outbox read at each scrape.
/// swift-metrics has one factory per process, so one registry serves every server in it.
/// Every series carries an `instance` label (`GatewayMetrics.instance`): several gateways over
/// one database report apart, whatever the scraper adds.
public final class GatewayMetrics: Sendable {
    public static let shared = GatewayMetrics()

    /// The instance's name in every series: what `name(instance:)` set before the first
    /// scrape (`caregate serve` passes `$CAREGATE_INSTANCE`), else the host name and process id.
    public static let instance: String = chosenInstance.withLock { $0 } ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
    private static let chosenInstance = Locked<String?>(nil)

    /// Names this process's series; only before the metrics are first made.
    public static func name(instance: String) { chosenInstance.withLock { $0 = instance } }

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
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.nameAndLabelSanitizer = { name, labels in (name, labels + [("instance", GatewayMetrics.instance)]) }
        MetricsSystem.bootstrap(factory)
        deviceSyncs = Self.counter(registry, "device_syncs", "Sync calls (pulls and pushes) by enrolled devices.")
        pulls = Self.counter(registry, "pulls", "Pull pages answered.")
        pushes = Self.counter(registry, "pushes", "Device pushes merged.")
        outboxQueued = Self.gauge(registry, "outbox_queued", "Outcome versions waiting to go to the EHR.")
        outboxPushed = Self.gauge(registry, "outbox_pushed", "Outcome versions the EHR holds.")
        outboxDead = Self.gauge(registry, "outbox_dead_letters", "Outcome versions the EHR refused for good.")
        ehrPushed = Self.counter(registry, "ehr_pushed", "Outcome versions the push worker delivered to the EHR.")
        ehrDeadLetters = Self.counter(registry, "ehr_dead_lettered", "Outcome versions the EHR refused (dead letters).")
        ehrRefreshes = Self.counter(registry, "ehr_refreshes", "Patient refreshes from the EHR (pulled or found unchanged).")
        notifications = Self.counter(registry, "ehr_notifications", "Rest-hook notifications accepted from the EHR.")
    }

    /// A counter named `caregate_<metric>_total`, as Prometheus names counters.
    static func counter(_ registry: PrometheusCollectorRegistry, _ metric: String, _ help: String) -> Prometheus.Counter {
        registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "caregate", metricName: metric, unitName: "total", helpText: help),
                             labels: [("instance", instance)])
    }

    /// A gauge named `caregate_<metric>`.
    static func gauge(_ registry: PrometheusCollectorRegistry, _ metric: String, _ help: String) -> Prometheus.Gauge {
        registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "caregate", metricName: metric, unitName: "", helpText: help),
                           labels: [("instance", instance)])
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
