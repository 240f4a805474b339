import NIOCore
import NIOHTTPTypes

/// Closes a connection whose next request head has not fully arrived within `deadline` of the
/// connection opening or of the last response ending. The idle timeout alone cannot do this: a
/// slow-loris client sends a byte of its headers now and then, so the connection is never idle.
final class RequestHeadDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let deadline: TimeAmount
    private var timer: Scheduled<Void>?

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) { arm(context) }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { disarm() }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { arm(context) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    private func arm(_ context: ChannelHandlerContext) {
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
