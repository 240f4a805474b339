#ifndef CAREGATE_CLIBXML2_SHIM_H
#define CAREGATE_CLIBXML2_SHIM_H
#include <libxml/xmlversion.h>
/* Debian's libxml2 is built with ICU, so its encoding.h includes the system's <unicode/ucnv.h>,
   which clashes with the ICU that Foundation bundles (_FoundationICU) in any module that sees
   both. CareGate never touches the ICU converter fields (trailing pointers in
   xmlCharEncodingHandler), so the ICU headers are left out. */
#undef LIBXML_ICU_ENABLED
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#include <libxml/parser.h>

/* libxml2 prints some errors (encoding conversion, I/O) through its generic handler, straight to
   stderr, besides reporting them to the reader. CareGate reports them itself, so they are
   dropped here; the handler is per thread, so this is called where a parser starts. */
static void caregate_drop_generic_error(void *context, const char *message, ...) { (void)context; (void)message; }
static inline void caregate_silence_generic_errors(void) {
    xmlSetGenericErrorFunc(NULL, caregate_drop_generic_error);
    xmlThrDefSetGenericErrorFunc(NULL, caregate_drop_generic_error);
}

/* xmlFree is a global function pointer; Swift 6 cannot touch it safely, so call it here. */
static inline void caregate_xml_free(void *pointer) { xmlFree(pointer); }

/* The line of the reader's current node (its element, for an attribute); libxml2's parser
   position runs ahead of the node the reader is on. */
static inline long caregate_reader_line(xmlTextReaderPtr reader) {
    xmlNodePtr node = xmlTextReaderCurrentNode(reader);
    if (node != NULL && node->type == XML_ATTRIBUTE_NODE && node->parent != NULL) node = node->parent;
    long line = node != NULL ? xmlGetLineNo(node) : -1;
    return line > 0 ? line : xmlTextReaderGetParserLineNumber(reader);
}
#endif
