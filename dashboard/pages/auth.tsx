import { BASE } from '../env.ts';
import { ErrorNote, Form, Layout } from '../layout.tsx';
import { MAX_EMAIL_LENGTH, MIN_PASSWORD_LENGTH } from '../owner.ts';

type Props = { csrf: string; error?: string; email?: string; setupToken?: string; /** The single sign-on issuer, when set up. */ sso?: string };

export function SignupPage(props: Props) {
  return (
    <Layout title="Create the owner account" csrf={props.csrf}>
      <p>This instance has no owner yet. The first account created here owns it, and signup then closes.</p>
      <ErrorNote message={props.error} />
      <Form action={`${BASE}/signup`} csrf={props.csrf}>
        {props.setupToken ? <input type="hidden" name="token" value={props.setupToken} /> : null}
        <p><label>Email<br /><input type="email" name="email" required maxlength={MAX_EMAIL_LENGTH} value={props.email ?? ''} autocomplete="username" /></label></p>
        <p><label>Password (at least {MIN_PASSWORD_LENGTH} characters)<br />
          <input type="password" name="password" required minlength={MIN_PASSWORD_LENGTH} autocomplete="new-password" /></label></p>
        <button type="submit">Create account</button>
      </Form>
    </Layout>
  );
}

export function LoginPage(props: Props) {
  return (
    <Layout title="Sign in" csrf={props.csrf}>
      <ErrorNote message={props.error} />
      <Form action={`${BASE}/login`} csrf={props.csrf}>
        <p><label>Email<br /><input type="email" name="email" required maxlength={MAX_EMAIL_LENGTH} value={props.email ?? ''} autocomplete="username" /></label></p>
        <p><label>Password<br /><input type="password" name="password" required autocomplete="current-password" /></label></p>
        <button type="submit">Sign in</button>
      </Form>
      {props.sso && (
        <p id="sso"><a href={`${BASE}/oidc/start`}>Sign in with single sign-on</a> <span class="muted">({props.sso})</span></p>
      )}
    </Layout>
  );
}

export function ErrorPage(props: { csrf: string; email?: string; title: string; message: string }) {
  return (
    <Layout title={props.title} csrf={props.csrf} email={props.email}>
      <p class="error">{props.message}</p>
      <p><a href={BASE}>Back to the dashboard</a></p>
    </Layout>
  );
}
