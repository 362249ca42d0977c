/**
 * An SMTP refusal: the reply code, and a text that starts with its enhanced status code (RFC
 * 3463), since smtp-server's own guess from the reply code alone is often the wrong one.
 */
export class SmtpReply extends Error {
  constructor(readonly responseCode: number, readonly enhancedCode: string, text: string) {
    super(`${enhancedCode} ${text}`);
  }
}

/** A message refused for what it is: never stored, and the same message is refused again. */
export const badMessage = (text: string) => new SmtpReply(550, '5.6.0', text);
