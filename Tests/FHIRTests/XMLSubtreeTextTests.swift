import CLibXML2
import Foundation
import Testing
@testable import FHIR

/// Narratives and unknown elements are kept as the text libxml2 itself writes for the subtree
/// (`xmlTextReaderReadOuterXml`), which is what the XML reader kept before it read SAX events.
@Suite("XML subtrees kept as libxml2 writes them")
struct XMLSubtreeTextTests {
    /// libxml2's own text for the `occurrence`th element named `localName` in the document.
    static func libxml2OuterXML(_ document: String, localName: String, occurrence: Int = 0) -> String? {
        let bytes = Array(document.utf8)
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_IGNORE_ENC.rawValue)
        guard let reader = bytes.withUnsafeBufferPointer({ buffer in
            buffer.withMemoryRebound(to: CChar.self) { xmlReaderForMemory($0.baseAddress, Int32($0.count), nil, nil, options) }
        }) else { return nil }
        defer { xmlFreeTextReader(reader) }
        var seen = 0
        while xmlTextReaderRead(reader) == 1 {
            guard xmlTextReaderNodeType(reader) == 1, let name = xmlTextReaderConstLocalName(reader),
                  String(cString: name) == localName else { continue }
            if seen == occurrence {
                guard let xml = xmlTextReaderReadOuterXml(reader) else { return nil }
                defer { caregate_xml_free(xml) }
                return String(cString: xml)
            }
            seen += 1
        }
        return nil
    }

    static let document = #"""
        <Patient xmlns="http://hl7.org/fhir" xmlns:h="urn:h" xmlns:f="urn:f">
          <id value="p1"/>
          <text>
            <status value="generated"/>
            <div xmlns="http://www.w3.org/1999/xhtml" title="a&amp;b é &#10;x&#9;y &quot;q&quot; ' &#38;#38; &lt;&gt;"><p>é &amp; &lt;&gt; "q" &#13; ' &#x1F600;</p><br></br><!-- c&amp; --><![CDATA[<x>&]]><?pi data?><?bare?><span xml:lang="fr" h:x="1">t</span>
              <b:z xmlns:b="urn:b" b:w="2"/><img src="a.png" alt=""/><f:q>x</f:q></div>
          </text>
          <unk a="1" b="é"><x/>text &amp; more<y z="&lt;&#13;"/><h:k/></unk>
          <f:extra xmlns:g="urn:g" g:a="1" h:b="2"><f:inner/></f:extra>
          <active value="true"/>
        </Patient>
        """#

    @Test("a narrative with escapes, non-ASCII, comments, CDATA, instructions, empty elements and outside namespaces is libxml2's text")
    func narrative() throws {
        let patient = try FHIRXMLReader().read(Self.document).resource
        let div = try #require(patient["text"]?.string("div"))
        #expect(div == Self.libxml2OuterXML(Self.document, localName: "div"))
        #expect(div.hasPrefix(#"<div xmlns="http://www.w3.org/1999/xhtml" xmlns:h="urn:h" xmlns:f="urn:f" title="a&amp;b &#xE9; &#10;x&#9;y &quot;q&quot; ' &amp;#38; &lt;&gt;">"#))
        #expect(div.contains("<br/>") && div.contains("<?bare?>") && div.contains("é &amp;"))
        #expect(patient.string("active") == "true")
    }

    @Test("unknown elements are kept as libxml2's text, with the namespaces they use from outside declared on them")
    func unknown() throws {
        let patient = try FHIRXMLReader().read(Self.document).resource
        let kept = patient.children.filter { $0.typeIndex == Element.unknownXML }.compactMap(\.value)
        #expect(kept.count == 2)
        #expect(kept.first == Self.libxml2OuterXML(Self.document, localName: "unk"))
        #expect(kept.last == Self.libxml2OuterXML(Self.document, localName: "extra"))
        #expect(kept.first?.hasPrefix(#"<unk xmlns="http://hl7.org/fhir" xmlns:h="urn:h" a="1" b="&#xE9;">"#) == true)
    }

    @Test("a narrative whose div takes its XHTML prefix from an ancestor is kept with that declaration")
    func prefixedNarrative() throws {
        let document = #"<Patient xmlns="http://hl7.org/fhir" xmlns:x="http://www.w3.org/1999/xhtml"><text><status value="generated"/><x:div><x:p>hi</x:p></x:div></text></Patient>"#
        let div = try #require(try FHIRXMLReader().read(document).resource["text"]?.string("div"))
        #expect(div == Self.libxml2OuterXML(document, localName: "div"))
        #expect(div == #"<x:div xmlns:x="http://www.w3.org/1999/xhtml"><x:p>hi</x:p></x:div>"#)
    }
}
