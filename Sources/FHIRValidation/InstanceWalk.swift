import FHIR
import FHIRPackages
import FHIRPath
import JSON

/// One validation: walks an instance beside the compiled profiles, element by element, and
/// collects what it finds. Issues about the validator's own limits (a value set it cannot expand,
/// an invariant it cannot evaluate) are reported once per validation.
struct InstanceWalk {
    let validator: ProfileValidator
    /// The outermost resource (`%rootResource`; the Bundle whose entries references resolve in).
    let root: Element
    /// The resources of `root` by `fullUrl` and `Type/id`, for references between entries.
    let bundleEntries: [String: Element]
    var issues: [ValidationIssue] = []
    var reportedOnce: Set<String> = []
    /// The url of the extension being walked, for the contexts of the extensions inside it.
    var hostExtensionURL: String?
    /// The resource being walked (`%resource`), innermost last, and where each is.
    private var resources: [Element] = []
    private var resourceLocations: [InstanceLocation] = []
    /// Where each of `resources` has its invariants evaluated.
    private var environments: [EvaluationEnvironment] = []
    /// What the walk's FHIRPath evaluations read outside the element they start from.
    private let outsideReads = OutsideReads()
    /// How many issues were reported and other things read outside the element walked (a
    /// reference resolved, an extension's context): a subtree whose walk left this and
    /// `outsideReads` unchanged is remembered as clean (`CleanVerdicts`).
    private var verdictTaints = 0

    /// The package unversioned claims are looked up in first.
    let package: String?

    init(validator: ProfileValidator, root: Element, package: String? = nil) {
        self.validator = validator
        self.root = root
        self.package = package
        var entries: [String: Element] = [:]
        if root.resourceType == "Bundle" {
            for entry in root.children(named: "entry") {
                guard let resource = entry["resource"] else { continue }
                if let fullURL = entry.string("fullUrl") { entries[fullURL] = resource }
                if let reference = resource.relativeReference { entries[reference] = entries[reference] ?? resource }
            }
        }
        bundleEntries = entries
    }

    /// The issues, without repeats (the base definition and a profile state many rules twice).
    func finishedIssues() -> [ValidationIssue] {
        // Most resources have no issue or one (a missing narrative's warning): nothing to repeat.
        guard issues.count > 1 else { return issues }
        struct Identity: Hashable {
            let severity: ValidationIssue.Severity
            let location: String
            let rule: String
        }
        var seen: Set<Identity> = []
        return issues.filter { issue in
            seen.insert(Identity(severity: issue.severity, location: issue.location, rule: issue.key ?? issue.message)).inserted
        }
    }

    mutating func report(_ issue: ValidationIssue) {
        verdictTaints += 1
        issues.append(issue)
    }

    /// Reports an issue only the first time its `key` is seen in this validation.
    mutating func reportOnce(_ key: String, _ issue: ValidationIssue) {
        verdictTaints += 1
        if reportedOnce.insert(key).inserted { issues.append(issue) }
    }

    // MARK: Resources

    /// A resource against its base definition, its claimed profiles and `extraProfiles`.
    mutating func validateResource(_ resource: Element, location: InstanceLocation, extraProfiles: [String]) {
        guard let type = resource.resourceType else {
            report(.init(.error, "structure", at: location, "not a resource the R4 definitions know"))
            return
        }
        resources.append(resource)
        resourceLocations.append(location)
        environments.append(makeEnvironment(resource: resource))
        defer { resources.removeLast(); resourceLocations.removeLast(); environments.removeLast() }
        // The profiles first, the base definition last: a rule both state is reported once, as the profile's.
        var canonicals = (resource["meta"]?.children(named: "profile") ?? []).compactMap(\.value)
        canonicals += extraProfiles
        canonicals.append("http://hl7.org/fhir/StructureDefinition/" + type)
        // (A resource names a few profiles: lists, not sets.)
        var done: [String] = []
        // Each profile once, however it is named: a claim (`url`) and a target (`url|version`)
        // often name the same one.
        var walked: [String] = []
        var walkedProfile = false
        let base = canonicals.last!
        for canonical in canonicals where !done.contains(canonical) {
            done.append(canonical)
            // A profile's snapshot holds every rule of the base definition: after one, the base adds nothing.
            if canonical == base && walkedProfile { continue }
            guard let profile = validator.profile(canonical, from: package) else {
                let why = validator.unusableReason(canonical).map { "it cannot be used: \($0)" } ?? "it is not loaded here"
                report(.init(.warning, "not-supported", at: location,
                             "profile \(canonical): \(why); the resource was not checked against it", profile: canonical))
                continue
            }
            guard profile.structure.type == type else {
                report(.init(.error, "structure", at: location,
                             "the resource is a \(type), but profile \(canonical) is for \(profile.structure.type)", profile: canonical))
                continue
            }
            guard !walked.contains(profile.versionedURL) else { continue }
            walked.append(profile.versionedURL)
            walk(resource, node: profile.root, in: profile, location: location, isResource: true)
            walkedProfile = true
        }
    }

    // MARK: Elements

    /// One instance element against one element definition, then its children.
    /// `isResource` is true for the resource being validated itself (its root element).
    /// An element with children equal to one found clean against the same definition is not
    /// walked again (`CleanVerdicts`).
    mutating func walk(_ item: Element, node: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation, isResource: Bool = false) {
        guard !isResource, !item.children.isEmpty, !item.isResource else {
            walkElement(item, node: node, in: profile, location: location, isResource: isResource)
            return
        }
        remembering(.element(item), node: node, hitRate: node.verdictHitRate, in: profile) { walk in
            walk.walkElement(item, node: node, in: profile, location: location, isResource: false)
        }
    }

    /// Runs `body` (a walk of `content` against `node`) unless an equal content met `node`
    /// cleanly before (`CleanVerdicts`); remembers it when the walk reported nothing and read
    /// nothing outside it.
    mutating func remembering(_ content: CleanVerdicts.Key.Content, node: CompiledProfile.Node, hitRate: VerdictHitRate,
                              in profile: CompiledProfile, _ body: (inout InstanceWalk) -> Void) {
        let verdicts = validator.cleanVerdicts
        guard verdicts.isEnabled, hitRate.shouldLookUp() else {
            body(&self)
            return
        }
        let key = CleanVerdicts.Key(node: node, profile: profile, package: package, inBundle: !bundleEntries.isEmpty, content: content)
        if verdicts.contains(key) {
            hitRate.noteHit()
            return
        }
        let (taints, reads) = (verdictTaints, outsideReads.count)
        body(&self)
        if verdictTaints == taints && outsideReads.count == reads { verdicts.insert(key) }
    }

    /// `walk` itself: the element's type, value, invariants, children and reference target.
    private mutating func walkElement(_ item: Element, node: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation, isResource: Bool) {
        let definition = node.definition
        if item.isUnknown {
            report(.init(.error, "structure", at: location, "content the R4 definitions do not describe", profile: profile.versionedURL, elementID: definition.id))
            return
        }
        let typeRef = matchingType(of: item, in: definition)
        if definition.types != nil && typeRef == nil && !isResource {
            let allowed = (definition.types ?? []).map(\.code).joined(separator: ", ")
            report(.init(.error, "structure", at: location, "type \(Self.typeName(of: item)) is not allowed here (allowed: \(allowed))",
                         profile: profile.versionedURL, elementID: definition.id))
            return
        }
        if item.isResource && !isResource {
            // A resource inside this one (contained, a Bundle entry): the element's own rules,
            // then the resource against its definitions and claims, as its own `%resource`.
            checkInvariants(item, node: node, typeRoot: nil, in: profile, location: location)
            validateResource(item, location: location, extraProfiles: typeRef?.profiles ?? [])
            return
        }
        checkValue(item, node: node, in: profile, location: location)
        let typeProfile = typeRef.flatMap { baseTypeProfile(for: $0, item: item) }
        checkInvariants(item, node: node, typeRoot: typeProfile?.root, in: profile, location: location)
        if let typeRef, !typeRef.profiles.isEmpty, node.children.isEmpty {
            walkTypeProfiles(item, typeRef: typeRef, location: location)
            return
        }
        if !node.children.isEmpty {
            walkChildren(item, parent: node, in: profile, location: location)
        } else if let reference = definition.contentReference, let target = profile.node(forReference: reference) {
            walkChildren(item, parent: target, in: profile, location: location)
        } else if let typeProfile {
            walkChildren(item, parent: typeProfile.root, in: typeProfile, location: location)
        }
        if let typeRef, typeRef.code == "Reference" || typeRef.code == "canonical", !typeRef.targetProfiles.isEmpty {
            checkReference(item, node: node, targets: typeRef.targetProfiles, canonical: typeRef.code == "canonical",
                           in: profile, elementID: definition.id, location: location)
        }
    }

    /// An element whose type names profiles (`Extension` with its definition, `Quantity` as
    /// `SimpleQuantity`): it must meet one of them.
    mutating func walkTypeProfiles(_ item: Element, typeRef: StructureDefinition.ElementDefinition.TypeRef, location: InstanceLocation) {
        var attempts: [[ValidationIssue]] = []
        for canonical in typeRef.profiles {
            guard let profile = validator.profile(canonical) else {
                reportOnce("profile " + canonical, .init(.warning, "not-supported", at: location,
                                                         "profile \(canonical) is not loaded here: not checked", profile: canonical))
                continue
            }
            let before = issues
            walk(item, node: profile.root, in: profile, location: location)
            let found = Array(issues[before.count...])
            issues = before
            if !found.contains(where: { $0.severity <= .error }) {
                issues += found
                return
            }
            attempts.append(found)
        }
        if let first = attempts.first { issues += first }
    }

    /// The children of `item` against the child definitions of `parent`: cardinality, slicing,
    /// each child walked, and children no definition allows.
    mutating func walkChildren(_ item: Element, parent: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        let isPrimitive = item.isPrimitive
        if item.children.isEmpty {
            // Most elements walked are primitives without an id or extensions: only minimums apply.
            for child in parent.requiredChildren where !(isPrimitive && child.name == "value") {
                if (child.definition.min ?? 0) > 0 { checkCardinality(0, of: child, in: profile, location: location) }
                if child.isSliced { walkSliced([Element](), node: child, in: profile, location: location) }
            }
            return
        }
        let children = item.children
        let definitions = parent.children.count
        // Each definition's run of children, in a buffer on the stack (this runs for every element with children).
        let matched = withUnsafeTemporaryAllocation(of: Range<Int>?.self, capacity: definitions) { runs -> Bool in
            runs.initialize(repeating: nil)
            guard let notAllowed = Self.runs(of: children, against: parent, isPrimitive: isPrimitive, into: runs) else { return false }
            for k in 0..<definitions {
                if isPrimitive && k == parent.valueChildIndex { continue }
                // Definitions the instance has nothing for are passed over unless they have a minimum or slices.
                guard let run = runs[k] ?? (parent.checkedWhenAbsent[k] ? 0..<0 : nil) else { continue }
                walk(children[run], of: parent.children[k], in: profile, location: location)
            }
            if notAllowed { reportNotAllowed(item, parent: parent, in: profile, location: location) }
            return true
        }
        if !matched { walkChildrenGrouped(item, parent: parent, in: profile, location: location) }
    }

    /// Each child definition's run of instance children (into `runs`, one per definition, nil
    /// for none), and whether a child has no definition. The instance's children are in
    /// definition order, repeats consecutive: each run of one name is matched to its definition
    /// by walking both lists once. Nil when one name comes in two runs (a tree built by hand):
    /// the children must be grouped by name instead.
    static func runs(of children: [Element], against parent: CompiledProfile.Node, isPrimitive: Bool,
                     into runs: UnsafeMutableBufferPointer<Range<Int>?>) -> Bool? {
        let definitions = parent.children
        var notAllowed = false
        var cursor = 0
        var start = 0
        while start < children.count {
            let name = children[start].name
            var end = start + 1
            while end < children.count && Element.sameName(children[end].name, name) { end += 1 }
            var k = cursor
            while k < definitions.count && !Element.sameName(definitions[k].name, name) { k += 1 }
            if k == definitions.count {
                // Out of the definition's order (a hand-built tree), or no definition has the name.
                guard let index = parent.childIndex(named: name) else {
                    if !(isPrimitive && name == "value") { notAllowed = true }
                    start = end
                    continue
                }
                k = index
            }
            if runs[k] != nil { return nil }
            runs[k] = start..<end
            cursor = k + 1
            start = end
        }
        return notAllowed
    }

    /// The instance's children of one name against their definition: cardinality, then each
    /// walked, or the slicing when the definition is sliced (its slices' minimums count even
    /// when nothing is there).
    private mutating func walk(_ items: ArraySlice<Element>, of child: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        if child.definition.min ?? 0 > 0 || !items.isEmpty {
            checkCardinality(items.count, of: child, in: profile, location: location)
        }
        if child.isSliced {
            // With no items, only the slices' minimums: nothing to remember.
            guard !items.isEmpty else { return walkSliced([Element](), node: child, in: profile, location: location) }
            // The items of a sliced element together: their slices are found by their
            // discriminators before each is walked, and equal items (a vital sign's category)
            // are neither matched nor walked again.
            // (Copied out of the parent's children: a remembered key holds only the items.)
            let items = Array(items)
            remembering(.items(items), node: child, hitRate: child.slicedItemsHitRate, in: profile) { walk in
                walk.walkSliced(items, node: child, in: profile, location: location)
            }
            return
        }
        for (i, element) in items.enumerated() {
            let path = childLocation(location, element, child, index: i)
            walk(element, node: child, in: profile, location: path)
            if child.isExtension {
                walkExtensionDefinition(element, at: child.definition.path, location: path)
            }
        }
    }

    /// `walkChildren` for an instance whose children of one name are not consecutive (a tree
    /// built by hand): the children grouped by name first.
    private mutating func walkChildrenGrouped(_ item: Element, parent: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        let isPrimitive = item.isPrimitive
        var present: [String: [Element]] = [:]
        for child in item.children { present[child.name, default: []].append(child) }
        for child in parent.children {
            let name = child.name
            if isPrimitive && name == "value" { continue }
            walk((present[name] ?? [])[...], of: child, in: profile, location: location)
        }
        reportNotAllowed(item, parent: parent, in: profile, location: location)
    }

    /// The children of `item` no child definition of `parent` allows.
    private mutating func reportNotAllowed(_ item: Element, parent: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        let isPrimitive = item.isPrimitive
        for (i, child) in item.children.enumerated() where parent.child(named: child.name) == nil {
            if isPrimitive && child.name == "value" { continue }
            report(.init(.error, "structure", at: location.child(child.name),
                         "element \(child.name) is not allowed here (child \(i) of \(Self.typeName(of: item)))",
                         profile: profile.versionedURL, elementID: parent.definition.id))
        }
    }

    /// The location of a child: JSON's name for a choice (`valueQuantity`), an index where the
    /// element repeats.
    func childLocation(_ location: InstanceLocation, _ element: Element, _ node: CompiledProfile.Node, index: Int) -> InstanceLocation {
        location.child(element.name, choiceType: node.isChoice ? element.typeName : nil, index: node.repeatsInBase ? index : nil)
    }

    mutating func checkCardinality(_ count: Int, of node: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        let definition = node.definition
        let min = definition.min ?? 0
        // (The label is written only for an issue: most checks find none.)
        var label: String { definition.sliceName == nil ? definition.path : "slice '\(definition.id)'" }
        if count < min {
            report(.init(.error, "structure", at: location, "\(label): minimum required = \(min), but only found \(count)",
                         profile: profile.versionedURL, elementID: definition.id))
        }
        if let max = definition.max, definition.maxIsStated, count > max {
            report(.init(.error, "structure", at: location, "\(label): max allowed = \(max), but found \(count)",
                         profile: profile.versionedURL, elementID: definition.id))
        }
    }

    // MARK: Types

    /// The allowed type the item has, or nil.
    func matchingType(of item: Element, in definition: StructureDefinition.ElementDefinition) -> StructureDefinition.ElementDefinition.TypeRef? {
        guard let types = definition.types else { return nil }
        let name = Self.typeName(of: item)
        for type in types {
            let code = type.code
            if code == name { return type }
            if code.hasPrefix("http://hl7.org/fhirpath/System.") && item.isPrimitive { return type }
            if (code == "BackboneElement" || code == "Element") && item.definition?.kind == .backbone { return type }
            if code == "Resource" || code == "DomainResource", item.isResource { return type }
        }
        return nil
    }

    /// The FHIR type name of an item (`Quantity`, `string`, `Observation`; a backbone element's path).
    static func typeName(of item: Element) -> String {
        item.typeName ?? "(unknown)"
    }

    /// The base definition of the item's type, for its children and its type's invariants.
    func baseTypeProfile(for typeRef: StructureDefinition.ElementDefinition.TypeRef, item: Element) -> CompiledProfile? {
        if item.definition?.kind == .backbone { return nil }
        if typeRef.code.hasPrefix("http://") { return nil }
        if typeRef.code == "Resource" || typeRef.code == "DomainResource" || typeRef.code == item.typeName {
            return validator.baseProfile(of: item)
        }
        return validator.baseProfile(ofType: typeRef.code)
    }

    // MARK: Values: fixed, pattern, binding, length

    mutating func checkValue(_ item: Element, node: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        let definition = node.definition
        let url = profile.versionedURL
        if let fixed = definition.fixed, !Pattern.matches(item, fixed.value, exact: true) {
            report(.init(.error, "value", at: location, "the value must be exactly \(fixed.value.serialized())",
                         profile: url, elementID: definition.id))
        }
        if let pattern = definition.pattern, !Pattern.matches(item, pattern.value, exact: false) {
            report(.init(.error, "value", at: location, "the value does not match the required pattern \(pattern.value.serialized())",
                         profile: url, elementID: definition.id))
        }
        if let value = item.value {
            if let kind = item.definition?.primitiveKind, !kind.isValid(value) {
                report(.init(.error, "value", at: location, "'\(value)' is not a valid \(Self.typeName(of: item)) (\(kind.ruleDescription))",
                             profile: url, elementID: definition.id))
            }
            if let maxLength = definition.maxLength, value.count > maxLength {
                report(.init(.error, "too-long", at: location, "the value is \(value.count) characters long, more than \(maxLength)",
                             profile: url, elementID: definition.id))
            }
        }
        if let binding = definition.binding { checkBinding(item, binding, profile: url, elementID: definition.id, location: location) }
    }

    mutating func checkBinding(_ item: Element, _ binding: StructureDefinition.ElementDefinition.Binding, profile: String, elementID: String, location: InstanceLocation) {
        switch binding.strength {
        case "required", "extensible", "preferred": break
        default: return
        }
        guard let valueSet = binding.valueSet else { return }
        let codes = Self.codes(of: item)
        guard let codes else { return }
        if codes.isEmpty {
            if binding.strength == "required" && item.typeName == "CodeableConcept" && item["text"] == nil {
                report(.init(.error, "code-invalid", at: location, "no code provided, and a code is required from the value set \(valueSet)",
                             profile: profile, elementID: elementID))
            }
            return
        }
        guard let expansion = validator.terminology.expansion(of: valueSet) else {
            reportOnce("valueset " + valueSet, .init(.information, "not-supported", at: location,
                                                      "value set \(valueSet) is not loaded here: codes bound to it are not checked",
                                                      profile: profile, elementID: elementID))
            return
        }
        if codes.contains(where: { expansion.contains(system: $0.system, code: $0.code) }) { return }
        guard expansion.isComplete else {
            reportOnce("valueset " + valueSet, .init(.information, "not-supported", at: location,
                                                      "value set \(valueSet) cannot be fully expanded here (\(expansion.incompleteBecause!)): codes bound to it outside what is known are not checked",
                                                      profile: profile, elementID: elementID))
            return
        }
        let shown = codes.map { ($0.system.map { $0 + "#" } ?? "") + $0.code }.joined(separator: ", ")
        let severity: ValidationIssue.Severity = binding.strength == "required" ? .error : .warning
        report(.init(severity, "code-invalid", at: location,
                     "the code\(codes.count == 1 ? "" : "s") provided (\(shown)) \(codes.count == 1 ? "is" : "are") not in the value set \(valueSet) (\(binding.strength))",
                     profile: profile, elementID: elementID))
    }

    /// The codes an item carries, for binding checks; nil for a type bindings do not apply to.
    static func codes(of item: Element) -> [(system: String?, code: String)]? {
        switch item.typeName {
        case "code", "string", "uri":
            return item.value.map { [(nil, $0)] } ?? []
        case "Coding":
            return item.string("code").map { [(item.string("system"), $0)] } ?? []
        case "Quantity", "SimpleQuantity", "Age", "Duration", "Distance", "Count", "MoneyQuantity":
            return item.string("code").map { [(item.string("system"), $0)] } ?? []
        case "CodeableConcept":
            return item.children(named: "coding").compactMap { coding in coding.string("code").map { (coding.string("system"), $0) } }
        default:
            return nil
        }
    }

    // MARK: Invariants

    mutating func checkInvariants(_ item: Element, node: CompiledProfile.Node, typeRoot: CompiledProfile.Node?,
                                  in profile: CompiledProfile, location: InstanceLocation) {
        let invariants = validator.invariants(of: node, typeRoot: typeRoot)
        guard !invariants.isEmpty else { return }
        for (invariant, elementID) in invariants {
            evaluate(invariant, on: item, profile: profile.versionedURL, elementID: elementID, location: location)
        }
    }

    mutating func evaluate(_ invariant: CompiledProfile.Invariant, on item: Element, profile: String, elementID: String, location: InstanceLocation) {
        let passed: Bool
        switch invariant.check {
        case .none:
            return
        case .hasValueOrChildren:
            passed = item.value != nil || item.isResource || item.children.contains { $0.name != "id" }
        case .unreadable(let error):
            let key = invariant.constraint.key
            reportOnce("invariant " + key, .init(.warning, "not-supported", at: location,
                                                 "invariant \(key) cannot be evaluated: its expression is not FHIRPath this engine reads (\(error))",
                                                 profile: profile, elementID: elementID, key: key))
            return
        case .expression(let expression):
            if let answer = expression.existenceTest(on: item) {
                passed = answer
                break
            }
            do {
                if let last = environments.indices.last {
                    // The resource's environment with this item as the context, changed in place.
                    // (Its one-item array reused, not allocated for each invariant.)
                    environments[last].context.removeAll(keepingCapacity: true)
                    environments[last].context.append(.element(item))
                    passed = Self.isTrue(try expression.evaluate(in: environments[last]))
                } else {
                    passed = Self.isTrue(try expression.evaluate(in: invariantEnvironment(item)))
                }
            } catch {
                let key = invariant.constraint.key
                reportOnce("invariant " + key, .init(.warning, "not-supported", at: location,
                                                     "invariant \(key) cannot be evaluated here: \(error.message)",
                                                     profile: profile, elementID: elementID, key: key))
                return
            }
        }
        if !passed {
            let constraint = invariant.constraint
            report(.init(constraint.severity == "warning" ? .warning : .error, "invariant", at: location,
                         "constraint failed: \(constraint.key): '\(constraint.human)'",
                         profile: profile, elementID: elementID, key: constraint.key))
        }
    }

    /// Where invariants and discriminator paths are evaluated: `%resource` the innermost
    /// resource, `%rootResource` the outermost, references resolved between Bundle entries,
    /// `memberOf()` answered from the loaded value sets, and collections read as R4's own
    /// invariants expect (`EvaluationEnvironment.lenientCollections`).
    func invariantEnvironment(_ item: Element) -> EvaluationEnvironment {
        var environment = environments.last ?? makeEnvironment(resource: root)
        environment.context = [.element(item)]
        return environment
    }

    /// The environment of the resources inside `root`, made once per resource.
    func makeEnvironment(resource: Element) -> EvaluationEnvironment {
        var environment = EvaluationEnvironment(context: [], resource: resource, rootResource: root)
        let entries = bundleEntries
        environment.resolveReference = { entries[$0] }
        environment.lenientCollections = true
        environment.outsideReads = outsideReads
        let terminology = validator.terminology
        environment.memberOf = { value, valueSet in
            guard case .element(let element) = value, let codes = InstanceWalk.codes(of: element),
                  let expansion = terminology.expansion(of: valueSet) else { return nil }
            if codes.contains(where: { expansion.contains(system: $0.system, code: $0.code) }) { return true }
            return expansion.isComplete ? false : nil
        }
        return environment
    }

    /// An invariant holds unless it gives `false` (or something that is not a Boolean): an empty
    /// result, as when an element it tests is absent (`reference.startsWith('#')` on a display-only
    /// Reference), is no failure, as the HL7 validator counts it.
    static func isTrue(_ result: [FHIRPathValue]) -> Bool {
        if result.isEmpty { return true }
        guard result.count == 1 else { return false }
        if case .boolean(let value) = result[0].systemValue { return value }
        return false
    }

    // MARK: References

    mutating func checkReference(_ item: Element, node: CompiledProfile.Node, targets: [String], canonical: Bool,
                                 in profile: CompiledProfile, elementID: String, location: InstanceLocation) {
        guard let reference = item.string("reference") else { return }
        // A target looked for among the contained resources or the Bundle's entries: the
        // verdict depends on more than the element.
        if reference.hasPrefix("#") || !bundleEntries.isEmpty { verdictTaints += 1 }
        let conformance = validator.conformance
        let types = validator.referenceTypes(of: node, canonical: canonical) {
            Set(targets.compactMap { conformance.resolve($0, type: "StructureDefinition")?.json["type"]?.stringValue })
        }
        guard !types.isEmpty, !types.contains("Resource") else { return }
        let target: Element?
        if reference.hasPrefix("#") {
            let id = String(reference.dropFirst())
            target = id.isEmpty ? resources.last : (resources.last?.children(named: "contained") ?? []).first { $0.string("id") == id }
        } else {
            target = bundleEntries.isEmpty ? nil : bundleEntries[reference]
        }
        let type = target?.resourceType ?? (reference.hasPrefix("urn:") || reference.hasPrefix("#") ? nil : Element.relativeReference(of: reference).map { String($0.prefix { $0 != "/" }) })
        guard let type else { return }
        if !types.contains(type) {
            report(.init(.error, "structure", at: location.child("reference"),
                         "the reference names a \(type), but only \(types.sorted().joined(separator: ", ")) may be referenced here",
                         profile: profile.versionedURL, elementID: elementID))
        }
    }

    // MARK: Extensions

    /// An extension that matched no slice naming its definition: checked against the definition
    /// its url names, when loaded, and where that definition allows it to be used.
    /// `path` is the extension element's path (`Patient.extension`, `Address.extension`).
    mutating func walkExtensionDefinition(_ element: Element, at path: String, location: InstanceLocation) {
        guard let url = element.string("url") else { return }
        // Where the extension is (its host and location) decides whether it is allowed.
        verdictTaints += 1
        guard let definition = validator.profile(url) else {
            if url.hasPrefix("http://hl7.org/fhir/StructureDefinition/") || url.hasPrefix("http://hl7.org/fhir/us/core/") {
                reportOnce("extension " + url, .init(.warning, "not-supported", at: location,
                                                     "extension \(url) is not loaded here: not checked"))
            }
            return
        }
        // The host by the definitions' path (`Address` inside a datatype's definition) and by the
        // instance's (`Patient.birthDate` for a primitive's extension): a context may name either.
        let host = String(path.split(separator: ".").dropLast().joined(separator: "."))
        // The instance's path from its own resource (`Patient.birthDate`, not `Bundle.entry[0].resource.birthDate`).
        var relative = location.description
        if let start = resourceLocations.last?.description, let type = resources.last?.resourceType, relative.hasPrefix(start) {
            relative = type + relative.dropFirst(start.count)
        }
        let instanceHost = Self.elementPath(relative).split(separator: ".").dropLast().joined(separator: ".")
        if let allowed = Self.contextRefusal(definition.structure.contexts, host: host, hostURL: hostExtensionURL),
           Self.contextRefusal(definition.structure.contexts, host: instanceHost, hostURL: hostExtensionURL) != nil {
            report(.init(.error, "structure", at: location,
                         "extension \(url) is not allowed here: its definition allows \(allowed); this element is \(host)",
                         profile: definition.versionedURL, elementID: "Extension"))
        }
        let outer = hostExtensionURL
        hostExtensionURL = url
        walk(element, node: definition.root, in: definition, location: location)
        hostExtensionURL = outer
    }

    /// The contexts in words when none admits an extension on `host` (an element path such as
    /// `Patient` or `Observation.component`, or `Extension` inside another extension whose url
    /// is `hostURL`); nil when one does. An element context names a path or a type: the host's
    /// path, its R4 type, or a type it derives from (`Element`, `Resource`, `DomainResource`).
    static func contextRefusal(_ contexts: [StructureDefinition.Context], host: String, hostURL: String?) -> String? {
        guard !contexts.isEmpty else { return nil }
        let types = Set(typeNames(atPath: host) + datatypeForms(of: host))
        for context in contexts {
            switch context.type {
            case "fhirpath":
                return nil
            case "extension":
                if context.expression == hostURL { return nil }
            default:
                let expression = context.expression
                if expression == host || types.contains(expression) { return nil }
                if ["Element", "Base", "BackboneElement", "Resource", "DomainResource"].contains(expression) { return nil }
                // `Patient.address` admits `Address` hosts reached through it, and the reverse.
                if host.hasSuffix("." + expression) { return nil }
            }
        }
        return contexts.map { "\($0.type == "element" ? "" : $0.type + " ")\($0.expression)" }.joined(separator: ", ")
    }

    /// A location without its indexes (`Patient.address[1].extension[0]` → `Patient.address.extension`).
    static func elementPath(_ location: String) -> String {
        var path = ""
        var skipping = false
        for character in location {
            if character == "[" { skipping = true } else if character == "]" { skipping = false } else if !skipping { path.append(character) }
        }
        return path
    }

    /// A path as seen from each datatype along it: `Patient.name.given` is also `HumanName.given`
    /// (a context names the element in its datatype's terms).
    static func datatypeForms(of path: String) -> [String] {
        let parts = path.split(separator: ".").map(String.init)
        guard let first = parts.first, var type = ModelInfo.r4.type(named: first) else { return [] }
        var forms: [String] = []
        for (i, part) in parts.enumerated().dropFirst() {
            guard let element = type.element(named: part), let next = element.typeNames.first.flatMap(ModelInfo.r4.type(named:)) else { return forms }
            if next.kind == .complex, i + 1 < parts.count { forms.append(([next.name] + parts[(i + 1)...]).joined(separator: ".")) }
            type = next
        }
        return forms
    }

    /// The R4 type names at an element path (`Patient.address` → Address; `Patient` → Patient).
    static func typeNames(atPath path: String) -> [String] {
        let parts = path.split(separator: ".").map(String.init)
        guard let first = parts.first, var type = ModelInfo.r4.type(named: first) else { return [path] }
        var names = [type.name]
        for part in parts.dropFirst() {
            guard let element = type.element(named: part), let next = element.typeNames.first.flatMap(ModelInfo.r4.type(named:)) else { return [path] }
            type = next
            names = element.typeNames
        }
        return names + [path]
    }
}
