import Diagnostics
import CareStore
import FHIR
import FHIRPath
import Foundation

/// Reads mapping files: YAML structure, known keys, expressions parsed, tables read, `include`d
/// tables merged and `extends` applied. Type checks come after, from `MappingValidator`.
public struct MappingLoader: Sendable {
    /// The folder `include`, `extends` and golden-test inputs must stay inside (nil: anywhere);
    /// the command line sets it to the working directory unless `--mapping-root` widens it.
    public var root: String?
    /// Files already parsed by this loader's reads, by path: the shared tables most mapping
    /// files include are parsed once per load, not once per file that includes them.
    let parsed = Locked<[String: YAMLTree]>([:])

    /// A loader keeping reads inside `root`.
    public init(root: String? = nil) {
        self.root = root
    }

    /// What a mapping file holds: a mapping (nil when it cannot be read at all), or only shared
    /// tables (no `resource`, only `tables`: what `include` names).
    public enum Contents: Sendable {
        /// A mapping file.
        case mapping(MappingFile?)
        /// A file of shared tables.
        case tables(MappingTables)
    }

    /// Reads a file once, as a mapping or as shared tables, with what was found reading it.
    public func read(_ path: String) -> (contents: Contents, diagnostics: [Diagnostic]) {
        var reader = Reader(root: root, parsed: parsed)
        guard let tree = reader.tree(path) else { return (.mapping(nil), reader.diagnostics) }
        if case .mapping(let pairs, _) = tree, Self.holdsOnlyTables(pairs.map(\.key)) {
            return (.tables(reader.sharedTables(tree)), reader.diagnostics)
        }
        return (.mapping(reader.load(path, tree: tree, chain: [])), reader.diagnostics)
    }

    /// The file with what was found reading it; the file is nil when it cannot be read at all.
    public func load(_ path: String) -> (file: MappingFile?, diagnostics: [Diagnostic]) {
        var reader = Reader(root: root, parsed: parsed)
        let file = reader.load(path, chain: [])
        return (file, reader.diagnostics)
    }

    /// Whether top-level keys are those of a file of shared tables.
    static func holdsOnlyTables(_ keys: [String]) -> Bool {
        !keys.contains("resource") && keys.contains("tables")
    }

    struct Reader {
        let root: String?
        let parsed: Locked<[String: YAMLTree]>
        var diagnostics: [Diagnostic] = []

        /// Whether a file this one names may be read; reports it when not.
        mutating func mayRead(_ path: String, named: String, at: SourceLocation) -> Bool {
            guard let root, !MappingSource.isInside(path, root: root) else { return true }
            error(at, "'\(named)' is outside the mapping root \(root); mapping files read only inside it (--mapping-root widens it)")
            return false
        }

        mutating func error(_ at: SourceLocation, _ message: String) { diagnostics.append(Diagnostic(.error, at, message)) }
        mutating func warning(_ at: SourceLocation, _ message: String) { diagnostics.append(Diagnostic(.warning, at, message)) }

        /// Parses `path` into a tree (once per loader: a file that cannot be parsed is tried,
        /// and reported, each time it is named), or reports why not.
        mutating func tree(_ path: String) -> YAMLTree? {
            if let tree = parsed.withLock({ $0[path] }) { return tree }
            guard let tree = parse(path) else { return nil }
            parsed.withLock { $0[path] = tree }
            return tree
        }

        private mutating func parse(_ path: String) -> YAMLTree? {
            let start = SourceLocation(file: path, line: 1, column: 1)
            if FolderFiles.isFolder(path) {
                error(SourceLocation(file: path), "a folder with no mapping file (.yaml, .yml) in it")
                return nil
            }
            guard let data = MappingSource.contents(path) else {
                let builtIn = BuiltInMappings.files.keys.filter(MappingSource.isYAML).sorted()
                error(start, MappingSource.isBuiltIn(path) ? "there is no such built-in file (\(builtIn.map { "builtin:" + $0 }.joined(separator: ", ")))" : "cannot read the file")
                return nil
            }
            guard let text = String(data: data, encoding: .utf8) else {
                error(start, "the file is not UTF-8 text")
                return nil
            }
            do {
                guard let tree = try YAMLTree.parse(text, file: path) else {
                    error(start, "the file is empty")
                    return nil
                }
                return tree
            } catch {
                diagnostics += error.diagnostics
                return nil
            }
        }

        /// Reads a file of shared tables, already parsed.
        mutating func sharedTables(_ tree: YAMLTree) -> MappingTables {
            var tables = MappingTables()
            guard case .mapping(let pairs, _) = tree else { return tables }
            for (key, keyAt, value) in pairs {
                switch key {
                case "tables": self.tables(value, into: &tables)
                case "caregate-mapping":
                    if value.scalar != "1" { error(value.location, "caregate-mapping \(value.scalar ?? "?") is not a format this CareGate reads (1)") }
                case "description": continue
                case "export-profiles":
                    tables.exportProfiles += list(value, key).compactMap { item in scalar(item, key).map { ExportProfileClaim(name: $0, location: item.location) } }
                default: error(keyAt, "a file of shared tables holds only tables and export-profiles; '\(key)' belongs in a mapping file")
                }
            }
            return tables
        }

        mutating func load(_ path: String, chain: [String]) -> MappingFile? {
            guard !chain.contains(path) else {
                error(SourceLocation(file: chain.last ?? path, line: 1, column: 1), "extends and include go round in a circle: \((chain + [path]).joined(separator: " → "))")
                return nil
            }
            guard let tree = tree(path) else { return nil }
            return load(path, tree: tree, chain: chain)
        }

        /// Reads a mapping file already parsed into `tree`.
        mutating func load(_ path: String, tree: YAMLTree, chain: [String]) -> MappingFile? {
            guard case .mapping(let pairs, let at) = tree else {
                error(tree.location, "a mapping file is a YAML mapping (caregate-mapping, resource, ...), not \(tree.kindName)")
                return nil
            }
            var present: Set<String> = []
            var file = MappingFile(path: path, resource: "", location: at)
            var ownTables: YAMLTree?
            var ruleBlocks: [(String, YAMLTree)] = []
            var version: YAMLTree?
            for (key, keyAt, value) in pairs {
                present.insert(key)
                switch key {
                case "caregate-mapping": version = value
                case "resource":
                    file.location = keyAt
                    if let name = scalar(value, "resource") {
                        if ModelInfo.r4.resourceType(named: name) == nil {
                            let suggestion = Suggestion.closest(to: name, among: ModelInfo.r4.types.filter { $0.kind == .resource && !$0.isAbstract }.map(\.name))
                            error(value.location, "'\(name)' is not an R4 resource type\(suggestion.map { "; did you mean '\($0)'?" } ?? "")")
                        }
                        file.resource = name
                    }
                case "description": file.description = scalar(value, "description")
                case "include": file.includes = list(value, "include").compactMap { scalar($0, "include") }
                case "known-modifiers":
                    for item in list(value, "known-modifiers") {
                        guard let url = scalar(item, "known-modifiers") else { continue }
                        if !isURI(url) { error(item.location, "'\(url)' is not a URI (a modifierExtension url)") }
                        file.knownModifiers.append(url)
                    }
                case "extends": file.extends = scalar(value, "extends")
                case "tables": ownTables = value
                case "patient": file.patient = expression(value)
                case "skip": file.skip = conditions(value, allowDelete: false)
                case "end": file.end = conditions(value, allowDelete: true)
                case "patient-fields": file.patientFields = fieldBlock(value, MappingSchema.patientFields, "patient-fields")
                case "care-plan": file.carePlan = fieldBlock(value, MappingSchema.carePlan, "care-plan")
                case "tasks", "contacts", "outcomes": ruleBlocks.append((key, value))
                case "tests": file.tests = tests(value, declaredIn: path)
                case "export-as": file.exportAs = exportTarget(value, keyAt)
                default: unknownKey(key, keyAt, MappingSchema.topLevel, "at the top level")
                }
            }
            if let version {
                if version.scalar != "1" { error(version.location, "caregate-mapping \(version.scalar ?? "?") is not a format this CareGate reads (1)") }
            } else {
                error(at, "missing 'caregate-mapping: 1' (the format version)")
            }
            if !present.contains("resource") { error(at, "missing 'resource': the FHIR resource type this file maps") }
            if let target = file.exportAs, target.resource == "MedicationAdministration", !file.resource.isEmpty, file.resource != "MedicationRequest" {
                error(target.location, "export-as MedicationAdministration is for medication tasks (a MedicationRequest mapping), not \(file.resource)")
            }
            var rulePresent: [String: Set<String>] = [:]
            for (key, value) in ruleBlocks {
                let kind: MappingRule.Kind = key == "tasks" ? .task : key == "contacts" ? .contact : .outcome
                let rules = list(value, key).compactMap { rule($0, kind, present: &rulePresent) }
                switch kind {
                case .task: file.tasks = rules
                case .contact: file.contacts = rules
                default: file.outcomes = rules
                }
            }
            func resolve(_ relative: String) -> String { MappingSource.resolve(relative, from: path) }
            // Included tables first, then the file's own entries over them.
            for include in file.includes {
                let includePath = resolve(include)
                guard mayRead(includePath, named: include, at: file.location) else { continue }
                guard let included = self.tree(includePath) else { continue }
                guard case .mapping(let includedPairs, _) = included else {
                    error(included.location, "an included file holds tables (caregate-mapping, tables), not \(included.kindName)")
                    continue
                }
                for (key, keyAt, value) in includedPairs {
                    switch key {
                    case "tables": tables(value, into: &file.tables)
                    case "caregate-mapping", "description": continue
                    default: error(keyAt, "an included file holds only tables; '\(key)' belongs in a mapping file")
                    }
                }
            }
            if let ownTables { tables(ownTables, into: &file.tables) }
            if let extends = file.extends {
                guard mayRead(resolve(extends), named: extends, at: file.location), let base = load(resolve(extends), chain: chain + [path]) else { return file }
                return merge(base: base, override: file, present: present, rulePresent: rulePresent)
            }
            return file
        }

        /// A site file over the file it extends: what it sets replaces, rules by name, tables by key.
        func merge(base: MappingFile, override: MappingFile, present: Set<String>, rulePresent: [String: Set<String>]) -> MappingFile {
            var merged = base
            merged.extends = override.extends
            merged.includes = base.includes + override.includes
            if present.contains("description") { merged.description = override.description }
            if present.contains("patient") { merged.patient = override.patient }
            if present.contains("skip") { merged.skip = override.skip }
            if present.contains("end") { merged.end = override.end }
            if present.contains("tests") { merged.tests = override.tests }
            if present.contains("export-as") { merged.exportAs = override.exportAs }
            merged.knownModifiers += override.knownModifiers
            for (key, value) in override.patientFields { merged.patientFields[key] = value }
            for (key, value) in override.carePlan { merged.carePlan[key] = value }
            // Tables: the override's entries (its own and its includes') over the base's.
            merged.tables.timing.codes.merge(override.tables.timing.codes.filter { override.tables.origins["timing-codes.\($0.key)"] != nil }) { $1 }
            merged.tables.timing.eventTimes.merge(override.tables.timing.eventTimes.filter { override.tables.origins["event-times.\($0.key)"] != nil }) { $1 }
            merged.tables.timing.weeklyDays.merge(override.tables.timing.weeklyDays.filter { override.tables.origins["weekly-days.\($0.key)"] != nil }) { $1 }
            merged.tables.healthKit.merge(override.tables.healthKit) { $1 }
            merged.tables.units.merge(override.tables.units) { $1 }
            merged.tables.taskCodes.merge(override.tables.taskCodes) { $1 }
            merged.tables.observationCodes.merge(override.tables.observationCodes) { $1 }
            merged.tables.origins.merge(override.tables.origins) { $1 }
            func mergeRules(_ base: [MappingRule], _ overrides: [MappingRule]) -> [MappingRule] {
                var result = base
                for rule in overrides {
                    guard let i = result.firstIndex(where: { $0.name == rule.name }) else { result.append(rule); continue }
                    let keys = rulePresent["\(rule.kind.rawValue)/\(rule.name)"] ?? []
                    var target = result[i]
                    target.location = rule.location
                    if keys.contains("each") { target.each = rule.each }
                    if keys.contains("skip") { target.skip = rule.skip }
                    if keys.contains("end") { target.end = rule.end }
                    if keys.contains("delegate") { target.delegate = rule.delegate }
                    if keys.contains("values") { target.values = rule.values }
                    for (k, v) in rule.fields { target.fields[k] = v }
                    for (k, v) in rule.lists { target.lists[k] = v }
                    for (k, v) in rule.lookups { target.lookups[k] = v }
                    result[i] = target
                }
                return result
            }
            merged.tasks = mergeRules(base.tasks, override.tasks)
            merged.contacts = mergeRules(base.contacts, override.contacts)
            merged.outcomes = mergeRules(base.outcomes, override.outcomes)
            return merged
        }

        // MARK: Pieces

        mutating func scalar(_ node: YAMLTree, _ key: String) -> String? {
            guard case .scalar(let text, _, _) = node else {
                error(node.location, "'\(key)' takes a single value, not \(node.kindName)")
                return nil
            }
            return text
        }

        mutating func list(_ node: YAMLTree, _ key: String) -> [YAMLTree] {
            if case .sequence(let items, _) = node { return items }
            error(node.location, "'\(key)' takes a list (lines starting with '- '), not \(node.kindName)")
            return []
        }

        mutating func expression(_ node: YAMLTree) -> MappingExpression? {
            guard case .scalar(let text, let at, let quoted) = node else {
                error(node.location, "expected a FHIRPath expression, found \(node.kindName)")
                return nil
            }
            do {
                let compiled = try FHIRPathExpression(text)
                return MappingExpression(text: text, location: at, compiled: compiled, quoted: quoted)
            } catch {
                let partial = MappingExpression(text: text, location: at, compiled: nil, quoted: quoted)
                self.error(partial.location(of: error.position), error.message)
                return partial
            }
        }

        mutating func unknownKey(_ key: String, _ at: SourceLocation, _ allowed: [String], _ place: String) {
            let hint = Suggestion.closest(to: key, among: allowed).map { "; did you mean '\($0)'?" } ?? ""
            error(at, "unknown key '\(key)' \(place)\(hint)")
        }

        mutating func conditions(_ node: YAMLTree, allowDelete: Bool) -> [MappingCondition] {
            list(node, allowDelete ? "end" : "skip").compactMap { item in
                guard case .mapping(let pairs, let at) = item else {
                    error(item.location, "a rule here is '- if: EXPRESSION' with a 'reason', not \(item.kindName)")
                    return nil
                }
                var test: MappingExpression?
                var reason: String?
                var delete = false
                for (key, keyAt, value) in pairs {
                    switch key {
                    case "if": test = expression(value)
                    case "reason": reason = scalar(value, "reason")
                    case "delete" where allowDelete:
                        delete = value.scalar == "true"
                        if !["true", "false"].contains(value.scalar ?? "") { error(value.location, "'delete' is true or false") }
                    default: unknownKey(key, keyAt, allowDelete ? Array(MappingSchema.condition) : ["if", "reason"], "in a \(allowDelete ? "end" : "skip") rule")
                    }
                }
                guard let test else {
                    error(at, "a \(allowDelete ? "end" : "skip") rule needs 'if'")
                    return nil
                }
                return MappingCondition(test: test, reason: reason, delete: delete, location: at)
            }
        }

        mutating func fieldBlock(_ node: YAMLTree, _ schema: [String: FieldType], _ name: String) -> [String: MappingExpression] {
            guard case .mapping(let pairs, _) = node else {
                error(node.location, "'\(name)' takes keys (\(schema.keys.sorted().joined(separator: ", "))), not \(node.kindName)")
                return [:]
            }
            var result: [String: MappingExpression] = [:]
            for (key, keyAt, value) in pairs {
                guard schema[key] != nil else { unknownKey(key, keyAt, Array(schema.keys), "in '\(name)'"); continue }
                if let e = expression(value) { result[key] = e }
            }
            return result
        }

        mutating func rule(_ node: YAMLTree, _ kind: MappingRule.Kind, present: inout [String: Set<String>]) -> MappingRule? {
            guard case .mapping(let pairs, let at) = node else {
                error(node.location, "a \(kind.rawValue) rule is a mapping of keys (name, each, ...), not \(node.kindName)")
                return nil
            }
            var rule = MappingRule(kind: kind, name: "", location: at)
            let fields = MappingSchema.fields(for: kind)
            var keys: Set<String> = []
            var allowed = Array(fields.keys) + (kind == .value ? ["each", "skip"] : Array(MappingSchema.ruleKeys))
            if kind == .task { allowed += Array(MappingSchema.taskLists.keys) + Array(MappingSchema.taskLookups.keys) }
            if kind == .outcome { allowed.append("values") }
            for (key, keyAt, value) in pairs {
                keys.insert(key)
                switch key {
                case "name" where kind != .value: rule.name = scalar(value, "name") ?? ""
                case "each": rule.each = expression(value)
                case "skip": rule.skip = conditions(value, allowDelete: false)
                case "end" where kind != .value: rule.end = conditions(value, allowDelete: true)
                case "delegate" where kind == .task || kind == .contact:
                    rule.delegate = value.scalar == "true"
                    if !["true", "false"].contains(value.scalar ?? "") { error(value.location, "'delegate' is true or false") }
                case "values" where kind == .outcome:
                    var ignored: [String: Set<String>] = [:]
                    rule.values = list(value, "values").compactMap { self.rule($0, .value, present: &ignored) }
                case _ where fields[key] != nil:
                    if let e = expression(value) { rule.fields[key] = e }
                case _ where kind == .task && MappingSchema.taskLists[key] != nil:
                    rule.lists[key] = list(value, key).compactMap { expression($0) }
                case _ where kind == .task && MappingSchema.taskLookups[key] != nil:
                    if let lookup = lookup(value, key) { rule.lookups[key] = lookup }
                default:
                    unknownKey(key, keyAt, allowed, "in a \(kind.rawValue) rule")
                }
            }
            if kind != .value {
                if rule.name.isEmpty { error(at, "a \(kind.rawValue) rule needs a 'name' (for messages, overrides and tests)") }
                present["\(kind.rawValue)/\(rule.name)"] = keys
            }
            // Required fields are checked after `extends` is applied (a site file names only what differs).
            return rule
        }

        mutating func lookup(_ node: YAMLTree, _ key: String) -> TableLookup? {
            guard case .mapping(let pairs, let at) = node else {
                error(node.location, "'\(key)' takes {table: NAME, key: EXPRESSION}, not \(node.kindName)")
                return nil
            }
            var table: String?
            var expr: MappingExpression?
            for (k, keyAt, value) in pairs {
                switch k {
                case "table": table = scalar(value, "table")
                case "key": expr = expression(value)
                default: unknownKey(k, keyAt, ["table", "key"], "in '\(key)'")
                }
            }
            guard let table, let expr else {
                error(at, "'\(key)' needs both 'table' and 'key'")
                return nil
            }
            return TableLookup(table: table, key: expr, location: at)
        }

        /// `export-as: {resource: MedicationAdministration, medication-system: URI}`.
        mutating func exportTarget(_ node: YAMLTree, _ at: SourceLocation) -> ExportTarget? {
            guard case .mapping(let pairs, _) = node else {
                error(node.location, "export-as is {resource, medication-system}, not \(node.kindName)")
                return nil
            }
            var target = ExportTarget(resource: "Observation", location: at)
            var named = false
            for (key, keyAt, value) in pairs {
                switch key {
                case "resource":
                    guard let name = scalar(value, key) else { continue }
                    named = true
                    if !MappingSchema.exportResources.contains(name) {
                        error(value.location, "outcomes are exported as \(MappingSchema.exportResources.joined(separator: " or ")), not '\(name)'")
                    }
                    target.resource = name
                case "medication-system":
                    guard let system = scalar(value, key) else { continue }
                    if !isURI(system) { error(value.location, "'\(system)' is not a URI (the code system of the tasks' group codes, such as RxNorm's)") }
                    target.medicationSystem = system
                default: unknownKey(key, keyAt, MappingSchema.exportAs, "in export-as")
                }
            }
            if !named { error(at, "export-as needs a resource (\(MappingSchema.exportResources.joined(separator: " or ")))") }
            if target.medicationSystem != nil && target.resource != "MedicationAdministration" {
                error(at, "medication-system belongs with resource: MedicationAdministration")
            }
            return target
        }

        mutating func tests(_ node: YAMLTree, declaredIn path: String) -> [GoldenTest] {
            list(node, "tests").compactMap { item in
                guard case .mapping(let pairs, let at) = item else {
                    error(item.location, "a test is {input: FILE, expect: FILE}, not \(item.kindName)")
                    return nil
                }
                var input: String?, expect: String?, zone: String?, now: String?
                for (key, keyAt, value) in pairs {
                    switch key {
                    case "input": input = scalar(value, "input")
                    case "expect": expect = scalar(value, "expect")
                    case "time-zone":
                        zone = scalar(value, "time-zone")
                        if let z = zone, TimeZone(identifier: z) == nil { error(value.location, "'\(z)' is not a time zone (use an IANA name such as America/New_York)") }
                    case "now":
                        now = scalar(value, "now")
                        if let n = now, FHIRDateTime(n)?.precision != .second { error(value.location, "'now' is an ISO 8601 instant (2026-11-01T09:00:00-05:00)") }
                    default: unknownKey(key, keyAt, Array(MappingSchema.test), "in a test")
                    }
                }
                guard let input, let expect else {
                    error(at, "a test needs 'input' and 'expect'")
                    return nil
                }
                return GoldenTest(input: input, expect: expect, timeZone: zone ?? "UTC", now: now ?? "2026-01-01T00:00:00Z", location: at, file: path)
            }
        }

        // MARK: Tables

        static let weekdays = ["sun": 1, "mon": 2, "tue": 3, "wed": 4, "thu": 5, "fri": 6, "sat": 7]

        mutating func clock(_ node: YAMLTree) -> Int? {
            guard let text = node.scalar, text.count == 5, let minutes = TimingTables.minutes(text) else {
                error(node.location, "a clock time is written hh:mm (\"07:30\"), not \(node.scalar.map { "'\($0)'" } ?? node.kindName)")
                return nil
            }
            return minutes
        }

        mutating func days(_ node: YAMLTree) -> [Int] {
            list(node, "days").compactMap { day in
                guard let name = day.scalar, let number = Reader.weekdays[name] else {
                    error(day.location, "a day is one of mon, tue, wed, thu, fri, sat, sun, not \(day.scalar.map { "'\($0)'" } ?? day.kindName)")
                    return nil
                }
                return number
            }
        }

        mutating func tables(_ node: YAMLTree, into tables: inout MappingTables) {
            guard case .mapping(let pairs, _) = node else {
                error(node.location, "'tables' takes named tables, not \(node.kindName)")
                return
            }
            for (name, nameAt, table) in pairs {
                guard MappingSchema.tables.contains(name) else {
                    unknownKey(name, nameAt, Array(MappingSchema.tables), "in 'tables'")
                    continue
                }
                guard case .mapping(let entries, _) = table else {
                    error(table.location, "the table '\(name)' takes entries (KEY: VALUE), not \(table.kindName)")
                    continue
                }
                if name == "ehr-rules" {
                    for (key, keyAt, value) in entries { if let rule = siteRule(value, key, keyAt) { tables.siteRules.append(rule) } }
                    continue
                }
                for (key, keyAt, value) in entries {
                    tables.origins["\(name).\(key)"] = keyAt
                    switch name {
                    case "event-times":
                        if let minutes = clock(value) { tables.timing.eventTimes[key] = minutes }
                    case "weekly-days":
                        guard let n = Int(key), (1...7).contains(n) else { error(keyAt, "weekly-days are keyed by a number of times a week, 1 to 7"); continue }
                        let d = days(value)
                        if d.count != n { error(value.location, "\(n) times a week needs \(n) days, found \(d.count)") }
                        tables.timing.weeklyDays[n] = d
                    case "timing-codes":
                        if let rule = timingCode(value, key) { tables.timing.codes[key] = rule }
                    case "healthkit":
                        if let linkage = healthKit(value, key, keyAt) { tables.healthKit[key] = linkage }
                    case "task-codes":
                        if let entry = taskCode(value, key, keyAt) { tables.taskCodes[key] = entry }
                    case "observation-codes":
                        if let entry = observationCode(value, key) { tables.observationCodes[key] = entry }
                    default:  // units
                        if !UCUMSyntax.isValid(key) { error(keyAt, "'\(key)' is not a valid UCUM unit") }
                        if let label = scalar(value, key) { tables.units[key] = label }
                    }
                }
            }
        }

        mutating func timingCode(_ node: YAMLTree, _ code: String) -> TimingRule? {
            guard case .mapping(let pairs, let at) = node else {
                error(node.location, "a timing code is {times: [...], every: 'N UNIT', days: [...]}, not \(node.kindName)")
                return nil
            }
            var rule = TimingRule()
            var hasRule = false
            for (key, keyAt, value) in pairs {
                switch key {
                case "times":
                    rule.timesOfDay = list(value, "times").compactMap { clock($0) }.sorted()
                    hasRule = true
                case "days":
                    rule.daysOfWeek = days(value).sorted()
                    rule.periodUnit = "wk"
                    hasRule = true
                case "every":
                    let parts = (value.scalar ?? "").split(separator: " ")
                    guard parts.count == 2, let n = Double(parts[0]), n > 0, TimingRule.seconds(in: String(parts[1])) != nil else {
                        error(value.location, "'every' is a number and a UCUM time unit (s, min, h, d, wk, mo, a): '4 h', '2 d'")
                        continue
                    }
                    rule.period = n
                    rule.periodUnit = String(parts[1])
                    hasRule = true
                default:
                    unknownKey(key, keyAt, ["times", "days", "every"], "in the timing code '\(code)'")
                }
            }
            if !hasRule { error(at, "the timing code '\(code)' needs times, days or every") }
            return hasRule ? rule : nil
        }

        /// Checks a `system|code` table key.
        mutating func codeKey(_ key: String, _ keyAt: SourceLocation, _ table: String) {
            let parts = key.split(separator: "|", maxSplits: 1)
            if parts.count != 2 {
                error(keyAt, "a \(table) entry is keyed by SYSTEM|CODE ('http://loinc.org|29463-7')")
            } else if !isURI(String(parts[0])) {
                error(keyAt, "the code system '\(parts[0])' is not a URI")
            }
        }

        /// `{system, code, display, unit}`.
        mutating func exportCoding(_ node: YAMLTree, _ what: String) -> ExportCoding? {
            guard case .mapping(let pairs, let at) = node else {
                error(node.location, "\(what) is {system, code, display, unit}, not \(node.kindName)")
                return nil
            }
            var system: String?, code: String?, display: String?, unit: String?
            for (k, kAt, value) in pairs {
                switch k {
                case "system":
                    system = scalar(value, k)
                    if let s = system, !isURI(s) { error(value.location, "the code system '\(s)' is not a URI") }
                case "code": code = scalar(value, k)
                case "display": display = scalar(value, k)
                case "unit":
                    unit = scalar(value, k)
                    if let u = unit, !UCUMSyntax.isValid(u) { error(value.location, "'\(u)' is not a valid UCUM unit") }
                default: unknownKey(k, kAt, ["system", "code", "display", "unit"], "in \(what)")
                }
            }
            guard let system, let code else {
                error(at, "\(what) needs a system and a code")
                return nil
            }
            return ExportCoding(system: system, code: code, display: display, unit: unit)
        }

        mutating func observationCode(_ node: YAMLTree, _ key: String) -> ObservationCode? {
            guard case .mapping(let pairs, let at) = node else {
                error(node.location, "an observation-codes entry is {code, category, unit, components}, not \(node.kindName)")
                return nil
            }
            var code: ExportCoding?, category: String?, unit: String?
            var components: [String: ExportCoding] = [:]
            for (k, kAt, value) in pairs {
                switch k {
                case "code": code = exportCoding(value, "the code of '\(key)'")
                case "category":
                    category = scalar(value, k)
                    let known = ModelInfo.r4.type(named: "Observation")?.element(named: "category") != nil
                    let categories = ["social-history", "vital-signs", "imaging", "laboratory", "procedure", "survey", "exam", "therapy", "activity"]
                    if known, let c = category, !categories.contains(c) {
                        error(value.location, "'\(c)' is not an observation-category code (\(categories.joined(separator: ", ")))")
                    }
                case "unit":
                    unit = scalar(value, k)
                    if let u = unit, !UCUMSyntax.isValid(u) { error(value.location, "'\(u)' is not a valid UCUM unit") }
                case "components":
                    guard case .mapping(let entries, _) = value else { error(value.location, "components are keyed by outcome value kind"); continue }
                    for (kind, _, coding) in entries { if let c = exportCoding(coding, "the component '\(kind)'") { components[kind] = c } }
                default: unknownKey(k, kAt, ["code", "category", "unit", "components"], "in an observation-codes entry")
                }
            }
            guard var code else {
                error(at, "the observation-codes entry '\(key)' needs a code")
                return nil
            }
            if code.unit == nil { code.unit = unit }
            return ObservationCode(code: code, category: category, components: components)
        }

        /// An `ehr-rules` entry: `{add-codings, accept-codes, accept-units, components-only-for, accept-statuses}`.
        mutating func siteRule(_ node: YAMLTree, _ name: String, _ nameAt: SourceLocation) -> SiteRule? {
            let keys = ["add-codings", "accept-codes", "accept-units", "components-only-for", "accept-statuses"]
            guard case .mapping(let pairs, _) = node, !pairs.isEmpty else {
                error(node.location, "the site rule '\(name)' is {\(keys.joined(separator: ", "))}, not \(node.kindName)")
                return nil
            }
            var rule = SiteRule(name: name, location: nameAt)
            /// `SYSTEM|CODE` keys and list items, checked.
            func codes(_ value: YAMLTree, _ what: String) -> Set<String> {
                Set(list(value, what).compactMap { item in
                    guard let code = scalar(item, what) else { return nil }
                    codeKey(code, item.location, "site rule")
                    return code
                })
            }
            func entries(_ value: YAMLTree, _ what: String) -> [(String, SourceLocation, YAMLTree)] {
                guard case .mapping(let entries, _) = value else {
                    error(value.location, "'\(what)' is keyed by SYSTEM|CODE, not \(value.kindName)")
                    return []
                }
                for (code, codeAt, _) in entries { codeKey(code, codeAt, what) }
                return entries
            }
            for (key, keyAt, value) in pairs {
                switch key {
                case "add-codings":
                    for (code, _, codings) in entries(value, key) {
                        let items: [YAMLTree] = if case .sequence = codings { list(codings, key) } else { [codings] }
                        rule.addCodings[code] = items.compactMap { exportCoding($0, "a coding added to \(code)") }
                    }
                case "accept-codes": rule.acceptCodes = codes(value, key)
                case "components-only-for": rule.componentsOnlyFor = codes(value, key)
                case "accept-units":
                    for (code, _, units) in entries(value, key) {
                        rule.acceptUnits[code] = Set(list(units, key).compactMap { unit in
                            guard let u = scalar(unit, key) else { return nil }
                            if !UCUMSyntax.isValid(u) { error(unit.location, "'\(u)' is not a valid UCUM unit") }
                            return u
                        })
                    }
                case "accept-statuses":
                    // The statuses R4 allows on what the gateway sends, from the model's required bindings.
                    let known = Set(["Observation", "MedicationAdministration", "QuestionnaireResponse"].flatMap { type in
                        ModelInfo.r4.type(named: type)?.element(named: "status")?.binding?.codes ?? []
                    })
                    rule.acceptStatuses = Set(list(value, key).compactMap { item in
                        guard let status = scalar(item, key) else { return nil }
                        if !known.contains(status) { error(item.location, "'\(status)' is not a status of what the gateway sends (\(known.sorted().joined(separator: ", ")))") }
                        return status
                    })
                default: unknownKey(key, keyAt, keys, "in the site rule '\(name)'")
                }
            }
            return rule
        }

        mutating func taskCode(_ node: YAMLTree, _ key: String, _ keyAt: SourceLocation) -> TaskCodeEntry? {
            codeKey(key, keyAt, "task-codes")
            guard case .mapping(let pairs, _) = node else {
                error(node.location, "a task-codes entry is {title, instructions, group, impacts-adherence}, not \(node.kindName)")
                return nil
            }
            var entry = TaskCodeEntry()
            for (k, kAt, value) in pairs {
                switch k {
                case "title": entry.title = scalar(value, k)
                case "instructions": entry.instructions = scalar(value, k)
                case "group": entry.group = scalar(value, k)
                case "impacts-adherence":
                    guard let v = value.scalar, ["true", "false"].contains(v) else { error(value.location, "impacts-adherence is true or false"); continue }
                    entry.impactsAdherence = v == "true"
                default: unknownKey(k, kAt, ["title", "instructions", "group", "impacts-adherence"], "in a task-codes entry")
                }
            }
            return entry
        }

        mutating func healthKit(_ node: YAMLTree, _ key: String, _ keyAt: SourceLocation) -> HealthKitLinkage? {
            codeKey(key, keyAt, "healthkit")
            guard case .mapping(let pairs, let at) = node else {
                error(node.location, "a healthkit entry is {identifier, type, unit}, not \(node.kindName)")
                return nil
            }
            var identifier: String?, type: HealthKitLinkage.QuantityType?, unit: String?
            for (k, kAt, value) in pairs {
                switch k {
                case "identifier":
                    identifier = scalar(value, k)
                    if let id = identifier, !id.hasPrefix("HKQuantityTypeIdentifier") {
                        error(value.location, "'\(id)' is not a HealthKit quantity type identifier (HKQuantityTypeIdentifier...)")
                    }
                case "type":
                    type = value.scalar.flatMap(HealthKitLinkage.QuantityType.init(rawValue:))
                    if type == nil { error(value.location, "type is cumulative or discrete") }
                case "unit": unit = scalar(value, k)
                default: unknownKey(k, kAt, ["identifier", "type", "unit"], "in a healthkit entry")
                }
            }
            guard let identifier, let type, let unit else {
                error(at, "a healthkit entry needs identifier, type and unit")
                return nil
            }
            return HealthKitLinkage(quantityIdentifier: identifier, quantityType: type, unitString: unit)
        }
    }
}

/// Whether text is an absolute URI (`http://loinc.org`, `urn:oid:2.16.840.1.113883.6.96`).
func isURI(_ text: String) -> Bool {
    guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return false }
    let scheme = text[..<colon]
    return scheme.first!.isLetter && scheme.allSatisfy { $0.isLetter || $0.isNumber || "+-.".contains($0) }
        && text.count > scheme.count + 1 && !text.contains(" ")
}
