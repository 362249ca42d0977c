import type { Project } from '../../src/projects/service.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, when } from '../layout.tsx';

export function ProjectsPage(props: { csrf: string; email: string; projects: Project[]; error?: string }) {
  return (
    <Layout title="Projects" csrf={props.csrf} email={props.email}>
      {props.projects.length === 0 ? (
        <p>No projects yet. Create one to get an API key.</p>
      ) : (
        <table>
          <thead><tr><th>Name</th><th>Id</th><th>Created</th></tr></thead>
          <tbody>
            {props.projects.map((p) => (
              <tr>
                <td><a href={`${BASE}/projects/${p.id}`}>{p.name}</a></td>
                <td><code>{p.id}</code></td>
                <td>{when(p.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <IfAllowed action={`${BASE}/projects`}>
        <h2>New project</h2>
        <ErrorNote message={props.error} />
        <Form action={`${BASE}/projects`} csrf={props.csrf}>
          <input type="text" name="name" required maxlength={200} placeholder="Project name" /> <button type="submit">Create project</button>
        </Form>
      </IfAllowed>
    </Layout>
  );
}
