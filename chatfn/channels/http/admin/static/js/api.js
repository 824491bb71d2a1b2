// The console's one door to the server: GET /admin/api/session once, then JSON calls that
// carry the session cookie and, on every state-changing request, the X-CSRF-Token header.

export const BASE = "/admin/api";

/** An error answer from the API: `status` and the server's own message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let session = null;

/** The signed-in user (GET /admin/api/session); without a session, back to the login page. */
export async function loadSession() {
  session = await request("GET", "/session");
  return session;
}

export function currentSession() {
  return session;
}

/** A chat's API path piece: each part encoded, so ids like "group:a/b" stay one segment. */
export function chatPath(platform, chatId) {
  return `${encodeURIComponent(platform)}/${encodeURIComponent(chatId)}`;
}

/** Query string from an object, skipping empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") q.set(key, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

export const get = (path, params) => request("GET", path + query(params));
export const post = (path, body) => request("POST", path, body);
export const patch = (path, body) => request("PATCH", path, body);
export const del = (path) => request("DELETE", path);

/** One JSON request; throws ApiError with the server's {"error": ...} text. */
export async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") {
    headers["X-CSRF-Token"] = session ? session.csrf : "";
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(BASE + path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    window.location.assign("/admin/login");
    throw new ApiError(401, "not signed in");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && data.error) || text || response.statusText;
    throw new ApiError(response.status, message);
  }
  return data;
}

/** Sign out (POST /admin/logout with the CSRF token), then show the login page. */
export async function logout() {
  await fetch("/admin/logout", {
    method: "POST",
    credentials: "same-origin",
    headers: { "X-CSRF-Token": session ? session.csrf : "" },
  });
  window.location.assign("/admin/login");
}
