import { BASE } from '../env.ts';
import { ErrorNote, Form, Layout } from '../layout.tsx';
import { MIN_PASSWORD_LENGTH } from '../owner.ts';

export function JoinPage(props: { csrf: string; token: string; email: string; role: string; error?: string }) {
  return (
    <Layout title="Join this Mailroom" csrf={props.csrf}>
      <p>You were invited as <strong id="invited-role">{props.role}</strong>. Choose a password to finish.</p>
      <ErrorNote message={props.error} />
      <Form action={`${BASE}/join/${props.token}`} csrf={props.csrf}>
        <p><label>Email<br /><input type="email" name="email" value={props.email} readonly autocomplete="username" /></label></p>
        <p><label>Password (at least {MIN_PASSWORD_LENGTH} characters)<br />
          <input type="password" name="password" required minlength={MIN_PASSWORD_LENGTH} autocomplete="new-password" /></label></p>
        <button type="submit">Join</button>
      </Form>
    </Layout>
  );
}
