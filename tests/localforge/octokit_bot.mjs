// A PR bot written with Octokit, as a team writes one: it reads a config file without a checkout, bumps
// a value on a new branch through the contents API, opens a draft pull request, labels it, asks for a
// review, assigns it, waits for `mergeable`, reports a commit status, reads the diff and the comparison
// and comments with what it found. tests/localforge/test_octokit.py runs it against the local forge and
// checks what the forge then holds. Every answer it relies on is printed as one JSON object.
import { Octokit } from "@octokit/rest";

const [owner, repo] = process.env.FORGE_REPO.split("/");
const octokit = new Octokit({ auth: process.env.FORGE_TOKEN, baseUrl: process.env.FORGE_API, request: { retries: 0 } });
const out = {};

const { data: repository } = await octokit.rest.repos.get({ owner, repo });
const base = repository.default_branch;
const { data: config } = await octokit.rest.repos.getContent({ owner, repo, path: "config/cache.toml", ref: base });
const text = Buffer.from(config.content, "base64").toString("utf8");
out.config = text;
const bumped = text.replace(/size_mb = (\d+)/, (_, n) => `size_mb = ${Number(n) * 2}`);

const { data: branch } = await octokit.rest.repos.getBranch({ owner, repo, branch: base });
await octokit.rest.git.createRef({ owner, repo, ref: "refs/heads/bot/cache", sha: branch.commit.sha });
const { data: written } = await octokit.rest.repos.createOrUpdateFileContents({
  owner,
  repo,
  path: "config/cache.toml",
  branch: "bot/cache",
  message: "perf: double the cache",
  content: Buffer.from(bumped).toString("base64"),
  sha: config.sha,
});
out.commit = written.commit.sha;

const { data: pull } = await octokit.rest.pulls.create({
  owner, repo, title: "perf: double the cache", head: "bot/cache", base, body: "Bumped by the bot.", draft: true,
});
out.number = pull.number;
await octokit.rest.issues.addLabels({ owner, repo, issue_number: pull.number, labels: ["performance", "bot"] });
await octokit.rest.pulls.requestReviewers({ owner, repo, pull_number: pull.number, reviewers: ["bob"] });
await octokit.rest.issues.addAssignees({ owner, repo, issue_number: pull.number, assignees: ["alice"] });

// A bot waits for GitHub to compute `mergeable` (null at first on GitHub); it must not wait forever.
let mergeable = null;
for (let attempt = 0; attempt < 20 && mergeable === null; attempt++) {
  const { data } = await octokit.rest.pulls.get({ owner, repo, pull_number: pull.number });
  mergeable = data.mergeable;
  out.mergeable_state = data.mergeable_state;
}
out.mergeable = mergeable;

await octokit.rest.repos.createCommitStatus({
  owner, repo, sha: written.commit.sha, state: "success", context: "bot/bench", description: "p50 41 → 11",
});
const { data: combined } = await octokit.rest.repos.getCombinedStatusForRef({ owner, repo, ref: "bot/cache" });
out.combined = combined.state;

const diff = await octokit.rest.pulls.get({ owner, repo, pull_number: pull.number, mediaType: { format: "diff" } });
out.diff_type = typeof diff.data;
out.diff = diff.data;
const { data: compared } = await octokit.rest.repos.compareCommitsWithBasehead({ owner, repo, basehead: `${base}...bot/cache` });
out.compare = { status: compared.status, ahead_by: compared.ahead_by, files: compared.files.map((f) => f.filename) };

await octokit.rest.issues.createComment({ owner, repo, issue_number: pull.number, body: `cache: ${text.trim()} → ${bumped.trim()}` });
const pulls = await octokit.paginate(octokit.rest.pulls.list, { owner, repo, state: "open", per_page: 1 });
out.open_pulls = pulls.map((p) => p.number);
const labels = await octokit.paginate(octokit.rest.issues.listLabelsOnIssue, { owner, repo, issue_number: pull.number, per_page: 1 });
out.labels = labels.map((l) => l.name).sort();

try {
  await octokit.rest.repos.createOrUpdateFileContents({
    owner, repo, path: "config/cache.toml", branch: "bot/cache", message: "stale", content: "eA==", sha: config.sha,
  });
  out.stale = "accepted";
} catch (error) {
  out.stale = { status: error.status, message: error.response.data.message };
}
console.log(JSON.stringify(out));
