// The durable flow of cmd/svc/durable_test.go. VERSION tells the bundle that ran the handler apart
// (the test uploads a copy with another VERSION as a newer deployment).
const VERSION = "A";

export default async function (p: any, ctx: any) {
  // Math.random, not ctx.random: a first step that ran again would return another value.
  const a = await ctx.step("first", () => Math.random());
  if (p.mode === "park") {
    const ok = await ctx.waitForApproval("go on?");
    return { a, approved: ok.approved, version: VERSION };
  }
  if (p.mode === "slow") {
    const b = await ctx.step("slow", () => {
      const end = Date.now() + 3000;
      while (Date.now() < end) {}
      return "slow done";
    });
    return { a, b, version: VERSION };
  }
  if (p.mode === "sleep") {
    await ctx.sleepUntil(ctx.now() + 2000);
    return { a, woke: true, version: VERSION };
  }
  return { a, version: VERSION };
}
