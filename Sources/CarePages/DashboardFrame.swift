import CareCharts
import Foundation

/// What every dashboard page shares: the document, the stylesheet link, the navigation and the
/// sign-out form. Pages carry no script and load nothing but `/ui/style.css` from the gateway
/// itself, so they work on an intranet with no internet. Each form carries the session's CSRF
/// token.
///
/// ```swift
/// let frame = DashboardFrame(csrf: session.csrf)
/// frame.page(title: "Outbox", section: .outbox, body: "<p>…</p>")
/// ```
public struct DashboardFrame: Sendable {
    /// The navigation's sections.
    public enum Section: String, Sendable, CaseIterable {
        case patients, outbox, imports, devices

        var path: String { self == .patients ? "/ui" : "/ui/\(rawValue)" }
        var label: String { rawValue.prefix(1).uppercased() + rawValue.dropFirst() }
    }

    /// The session's CSRF token, put in every form.
    public let csrf: String

    public init(csrf: String) {
        self.csrf = csrf
    }

    /// A whole page; `title` is plain text (escaped here), `body` is HTML.
    public func page(title: String, section: Section?, body: String) -> String {
        let links = Section.allCases.map { s in
            "<a href=\"\(s.path)\"\(s == section ? " aria-current=\"page\"" : "")>\(s.label)</a>"
        }.joined()
        let signOut = form(action: "/ui/logout", fields: [:], button: "Sign out", style: "link")
        return Self.document(title: title, body: """
            <header class="bar"><span class="brand">CareGate</span><nav>\(links)</nav>\(signOut)</header>\
            <main><h1>\(HTMLText.escaped(title))</h1>\(body)</main>
            """)
    }

    /// A POST form of hidden fields and one button, with the CSRF token.
    public func form(action: String, fields: [String: String], button: String, style: String = "button") -> String {
        let hidden = ([("csrf", csrf)] + fields.sorted { $0.key < $1.key }).map { name, value in
            "<input type=\"hidden\" name=\"\(HTMLText.escaped(name))\" value=\"\(HTMLText.escaped(value))\">"
        }.joined()
        return "<form method=\"post\" action=\"\(HTMLText.escaped(action))\" class=\"inline\">\(hidden)<button type=\"submit\" class=\"\(style)\">\(HTMLText.escaped(button))</button></form>"
    }

    /// The sign-in page: one field for the admin token.
    public static func login(message: String?) -> String {
        let note = message.map { "<p class=\"error\" role=\"alert\">\(HTMLText.escaped($0))</p>" } ?? ""
        return document(title: "Sign in", body: """
            <main class="login"><h1>CareGate</h1><p>Sign in with the admin token from the gateway's configuration.</p>\(note)\
            <form method="post" action="/ui/login"><label for="token">Admin token</label>\
            <input id="token" name="token" type="password" autocomplete="current-password" required>\
            <button type="submit" class="button">Sign in</button></form></main>
            """)
    }

    static func document(title: String, body: String) -> String {
        """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">\
        <title>\(HTMLText.escaped(title)) · CareGate</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/ui/style.css"></head><body>\(body)</body></html>
        """
    }

    /// The dashboard's stylesheet, served at `/ui/style.css`: readable from 375 px phones to
    /// desktop screens; wide tables scroll inside their box.
    public static let stylesheet = """
        *{box-sizing:border-box}body{margin:0;font-family:-apple-system,system-ui,sans-serif;color:#1c1c1e;background:#f2f2f7}\
        .bar{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1rem;padding:.6rem 1rem;background:#fff;border-bottom:1px solid #d1d1d6}\
        .brand{font-weight:700}nav{display:flex;gap:1rem;flex:1}nav a{color:#007aff;text-decoration:none}\
        nav a[aria-current=page]{font-weight:700;color:#1c1c1e}\
        main{max-width:1100px;margin:0 auto;padding:1rem}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}\
        section,.card{background:#fff;border-radius:10px;padding:.8rem 1rem;margin:1rem 0}\
        .scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:.9rem}\
        caption{text-align:left;font-weight:600;padding:.3rem 0}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #e5e5ea;vertical-align:top}\
        svg.chart,svg.week-strip{width:100%;height:auto;display:block;margin:.6rem 0}svg.week-strip{max-width:420px}\
        .grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:1rem}\
        .tasks{list-style:none;padding:0;margin:0}.tasks li{padding:.5rem 0;border-bottom:1px solid #e5e5ea}\
        .done{color:#248a3d}.due{color:#6b6b70}.error{color:#c0392b}.muted{color:#6b6b70}\
        form.inline{display:inline;margin:0}button.button{background:#007aff;color:#fff;border:0;border-radius:8px;padding:.4rem .8rem;font:inherit;cursor:pointer}\
        button.link{background:none;border:0;color:#007aff;font:inherit;cursor:pointer;padding:0}\
        .login{max-width:360px;margin:4rem auto;background:#fff;border-radius:12px;padding:1.5rem}\
        .login label{display:block;margin:.8rem 0 .3rem}.login input{width:100%;padding:.5rem;font:inherit;margin-bottom:1rem}\
        code,pre{font-size:.8rem;white-space:pre-wrap;word-break:break-all}
        """
}
