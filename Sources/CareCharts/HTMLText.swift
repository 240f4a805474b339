/// Text made safe for HTML and SVG: the one escaping function of every page, report and chart.
/// Patient names, task titles and outcome values are PHI typed by people and EHRs: each is
/// escaped where it is written, for element content and quoted attribute values alike.
public enum HTMLText {
    /// `&`, `<`, `>`, `"` and `'` as character references.
    public static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
