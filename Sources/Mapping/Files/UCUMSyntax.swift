/// Checks that a unit is written in UCUM's case-sensitive syntax (`mg`, `mL/min`, `mm[Hg]`,
/// `/min`, `kg/m2`, `10*3/uL`, `{tablet}`): products and quotients of prefixed atoms with
/// exponents, annotations and numbers. The atoms are UCUM's base units and the derived and
/// customary ones clinical data uses.
enum UCUMSyntax {
    static let atoms: Set<String> = [
        // Base and SI-derived.
        "m", "s", "g", "rad", "K", "C", "cd", "mol", "sr", "Hz", "N", "Pa", "J", "W", "A", "V", "F", "Ohm", "S", "Wb",
        "Cel", "T", "H", "lm", "lx", "Bq", "Gy", "Sv", "kat", "U", "l", "L", "ar", "t", "bar", "u", "eV", "pc", "B", "Np",
        "cal", "[Cal]", "osm", "eq", "gon", "deg", "'", "''",
        // Time.
        "min", "h", "d", "a", "wk", "mo", "a_t", "a_j", "a_g", "mo_s", "mo_j", "mo_g",
        // Dimensionless.
        "1", "%", "[ppth]", "[ppm]", "[ppb]", "[pptr]", "[pi]", "10*", "10^",
        // Clinical and customary.
        "[iU]", "[IU]", "[arb'U]", "[USP'U]", "[pH]", "[drp]", "[HPF]", "[LPF]", "[degF]", "[degR]", "m[Hg]", "m[H2O]",
        "[in_i]", "[ft_i]", "[yd_i]", "[mi_i]", "[lb_av]", "[oz_av]", "[gr]", "[stone_av]", "[tsp_us]", "[tbs_us]",
        "[foz_us]", "[pt_us]", "[qt_us]", "[gal_us]", "[cup_us]", "[foz_br]", "[pt_br]", "[in_i'Hg]", "[kn_i]",
        "[car_m]", "[smoot]", "[mesh_i]", "[Ch]", "[diop]", "[hp_X]", "[hp_C]", "[kp_X]", "[kp_C]", "[sft_i]", "[sin_i]",
        "[cft_i]", "[cin_i]", "g%", "[S]", "[CFU]", "[PFU]", "[FFU]", "[BAU]", "[AU]", "[bdsk'U]", "[ka'U]", "[knk'U]",
        "[mclg'U]", "[tb'U]", "[todd'U]", "[dye'U]", "[smgy'U]", "[beth'U]", "[HP]", "[MET]", "[EID_50]", "[TCID_50]",
        "[CCID_50]", "[Lf]", "[D'ag'U]", "[FEU]", "[ELU]", "[EU]", "Ci", "R", "RAD", "REM", "G", "Gs", "Mx", "Oe", "Gb",
        "St", "P", "dyn", "erg", "Ky", "Gal", "Lmb", "sb", "ph", "b", "mho", "[psi]", "atm", "att", "[m_e]", "[m_p]",
        "[c]", "[h]", "[k]", "[e]", "[G]", "[g]", "[ly]", "AU", "mol", "[mu_0]", "[eps_0]",
    ]

    static let prefixes = ["da", "Ki", "Mi", "Gi", "Ti", "Y", "Z", "E", "P", "T", "G", "M", "k", "h", "d", "c", "m", "u", "n", "p", "f", "a", "z", "y"]

    static func isValid(_ unit: String) -> Bool {
        guard !unit.isEmpty, !unit.contains(" ") else { return false }
        var text = Substring(unit)
        if text.first == "/" { text = text.dropFirst() }
        return term(text)
    }

    /// Components joined by `.` and `/` outside brackets, braces and parentheses.
    static func term(_ text: Substring) -> Bool {
        var depth = 0
        var start = text.startIndex
        var components: [Substring] = []
        var i = text.startIndex
        while i < text.endIndex {
            let c = text[i]
            if c == "[" || c == "{" || c == "(" { depth += 1 }
            if c == "]" || c == "}" || c == ")" { depth -= 1; if depth < 0 { return false } }
            if depth == 0 && (c == "." || c == "/") {
                components.append(text[start..<i])
                start = text.index(after: i)
            }
            i = text.index(after: i)
        }
        guard depth == 0 else { return false }
        components.append(text[start...])
        return components.allSatisfy(component)
    }

    static func component(_ text: Substring) -> Bool {
        guard !text.isEmpty else { return false }
        var t = text
        // A trailing annotation: `{tablet}`, `mL{total}`.
        if t.last == "}", let open = t.lastIndex(of: "{") {
            if t[t.index(after: open)..<t.index(before: t.endIndex)].contains("}") { return false }
            t = t[..<open]
            if t.isEmpty { return true }
        }
        if t.first == "(", t.last == ")" { return term(t.dropFirst().dropLast()) }
        if t.allSatisfy({ $0.isASCII && $0.isNumber }) { return true }
        // A trailing exponent: `m2`, `s-1`, `10*3`.
        var end = t.endIndex
        while end > t.startIndex, t[t.index(before: end)].isASCII, t[t.index(before: end)].isNumber { end = t.index(before: end) }
        if end < t.endIndex, end > t.startIndex, t[t.index(before: end)] == "-" || t[t.index(before: end)] == "+" { end = t.index(before: end) }
        let simple = end > t.startIndex ? t[..<end] : t
        return simpleUnit(String(simple)) || (end < t.endIndex && simpleUnit(String(t)))
    }

    static func simpleUnit(_ text: String) -> Bool {
        if atoms.contains(text) { return true }
        for prefix in prefixes where text.hasPrefix(prefix) && text.count > prefix.count {
            if atoms.contains(String(text.dropFirst(prefix.count))) { return true }
        }
        return false
    }
}
