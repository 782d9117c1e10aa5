/**
 * The failure converter of the worker, its workflow bundle and every client: a failure's message and stack trace go
 * into its encoded attributes, a payload the payload codec encrypts like any other, so provider error text (codes,
 * reasons) never reaches a history in plain text. The history shows `Encoded failure`; the workers and clients, and
 * the web UI through the codec endpoint, read the original back.
 *
 * Loaded by path (`failureConverterPath`) and bundled into the workflow code: it imports nothing but the SDK.
 */
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
