import NIOCore
import NIOHTTPTypes

/// Closes a connection whose next request does not arrive in time: its head within
/// `headDeadline` of the connection opening or of the last response ending, and its body whole
/// within `bodyDeadline` of its head. The idle timeout alone cannot do this: a slow-loris client
/// sends a byte of its headers (or of its body) now and then, so the connection is never idle,
/// and such connections piled up until the process ran out of file descriptors.
final class RequestDeadlines: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let headDeadline: TimeAmount
    let bodyDeadline: TimeAmount
    private var timer: Scheduled<Void>?
    /// Between a request's head and the end of its body.
    private var readingBody = false

    init(head: TimeAmount, body: TimeAmount) {
        headDeadline = head
        bodyDeadline = body
    }

    func handlerAdded(context: ChannelHandlerContext) { arm(context, headDeadline) }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            readingBody = true
            arm(context, bodyDeadline)
        case .end:
            readingBody = false
            disarm()
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // A response sent before its request's body ended (a refusal) leaves the body's deadline running.
        if case .end = unwrapOutboundIn(data), !readingBody { arm(context, headDeadline) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    private func arm(_ context: ChannelHandlerContext, _ deadline: TimeAmount) {
        disarm()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: deadline) { channel.close(promise: nil) }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}

/// Closes a connection whose request body passes `ceiling` bytes. A route refuses a body over its
/// own limit with 413, but HTTP/1.1 keep-alive would then read and drop the rest, however large;
/// past the ceiling (above every route's limit) the connection is closed instead.
final class RequestBodyCeiling: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let ceiling: Int
    private var received = 0

    init(ceiling: Int) {
        self.ceiling = ceiling
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: received = 0
        case .body(let buffer):
            received += buffer.readableBytes
            if received > ceiling {
                context.close(promise: nil)
                return
            }
        case .end: break
        }
        context.fireChannelRead(data)
    }
}
