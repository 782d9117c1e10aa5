/**
 * A Temporal client connection closed while one of its calls waits to be retried (the SDK's retry interceptor waits
 * with a timer, and `Connection.close()` does not clear it) threw "Channel has been shut down" from that timer: an
 * uncaught exception, so an API process stopping during a Temporal outage, or a test file closing its connection with a
 * call in its backoff, ended with exit code 1 instead of the call's error. Placed after the retry interceptor, this
 * turns that throw into the call's answer: CANCELLED (not retried), which its caller sees as the call's rejection; a
 * call made once the connection is closed is answered the same.
 */
import { InterceptingCall, type Interceptor, Metadata, status } from '@grpc/grpc-js';
import { defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';

const shutDown = 'Channel has been shut down';

/** What an InterceptingCall wraps (grpc-js does not export the interface by name). */
type CallInterface = ConstructorParameters<typeof InterceptingCall>[0];

/** An interceptor that answers CANCELLED for a call made on a connection that was closed, instead of throwing. */
export const closedConnectionGuard: Interceptor = (options, nextCall) => {
  try {
    return new InterceptingCall(nextCall(options));
  } catch (err) {
    if (!(err instanceof Error) || err.message !== shutDown) throw err;
    return new InterceptingCall(closedCall());
  }
};

/**
 * A call that never reaches a channel: started, it answers CANCELLED on the next tick, after the "no message" grpc-js
 * gives every failed unary call first (the SDK's retry interceptor passes the saved message on before the status, and
 * threw without one, from this tick, uncaught); nothing else does anything.
 */
function closedCall(): CallInterface {
  const nothing = (): void => undefined;
  return {
    start: (_metadata, listener) => {
      process.nextTick(() => {
        listener?.onReceiveMessage?.(null);
        listener?.onReceiveStatus?.({ code: status.CANCELLED, details: shutDown, metadata: new Metadata() });
      });
    },
    sendMessageWithContext: nothing,
    sendMessage: nothing,
    startRead: nothing,
    halfClose: nothing,
    cancelWithStatus: nothing,
    getPeer: () => '',
    getAuthContext: () => null,
  };
}

/**
 * The gRPC interceptors of a grpc-js `Connection` (the API's, the scripts', the tests'): the SDK's default retries,
 * then {@link closedConnectionGuard}, so a call waiting for its retry when the connection closes is answered CANCELLED
 * instead of throwing from its timer.
 */
export const clientInterceptors = (): Interceptor[] => [
  makeGrpcRetryInterceptor(defaultGrpcRetryOptions()),
  closedConnectionGuard,
];
