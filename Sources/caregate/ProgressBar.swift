import Foundation
import Gateway

/// Progress of a long command on standard error: a bar with the count, the rate and the time
/// left, redrawn in place at most ten times a second, when standard error is a terminal. In
/// pipes and CI it prints nothing, or with `plainLines` a plain line at each tenth (`import`'s
/// lines, which scripts may already read).
///
/// ```swift
/// let progress = ProgressBar()
/// for (i, file) in files.enumerated() { progress.update("reading", done: i, total: files.count) }
/// progress.finish()
/// ```
final class ProgressBar: @unchecked Sendable {
    let terminal: Bool
    let plainLines: Bool
    private let lock = NSLock()
    private let start = ContinuousClock.now
    private var lastDraw: ContinuousClock.Instant?
    private var drawn = false

    init(terminal: Bool = isatty(2) == 1, plainLines: Bool = false) {
        self.terminal = terminal
        self.plainLines = plainLines
    }

    func update(_ stage: String, done: Int, total: Int) {
        guard total > 0 else { return }
        lock.withLock {
            if terminal {
                let now = ContinuousClock.now
                if let lastDraw, now - lastDraw < .milliseconds(100), done < total { return }
                lastDraw = now
                drawn = true
                let text = "\r" + Self.line(stage, done: done, total: total, elapsed: (now - start).seconds) + "\u{1B}[K"
                _ = text.withCString { write(2, $0, strlen($0)) }
            } else if plainLines, done < total, total >= 20, done % max(1, total / 10) == 0 {
                StandardError.print("\(stage) \(done)/\(total)")
            }
        }
    }

    /// Ends the bar's line, so what follows starts on a line of its own.
    func finish() {
        lock.withLock {
            if drawn { _ = write(2, "\n", 1) }
            drawn = false
        }
    }

    /// `storing [#########-----------] 4,512/10,000 · 1,204/s · 5 s left`
    static func line(_ stage: String, done: Int, total: Int, elapsed: Double, width: Int = 20) -> String {
        let filled = min(width, max(0, done * width / max(total, 1)))
        var text = "\(TerminalText.escaped(stage)) [\(String(repeating: "#", count: filled))\(String(repeating: "-", count: width - filled))] "
        text += "\(grouped(done))/\(grouped(total))"
        guard elapsed >= 0.5, done > 0 else { return text }
        let rate = Double(done) / elapsed
        text += " · \(grouped(Int(rate.rounded())))/s"
        if done < total { text += " · \(duration(Double(total - done) / rate)) left" }
        return text
    }

    /// 12345 as "12,345".
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (value < 0 ? "-" : "") + out
    }

    /// "8 s", "3 min 5 s", "2 h 14 min".
    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        if s < 60 { return "\(s) s" }
        if s < 3600 { return "\(s / 60) min \(s % 60) s" }
        return "\(s / 3600) h \(s % 3600 / 60) min"
    }
}
