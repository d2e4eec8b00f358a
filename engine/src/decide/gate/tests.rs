//! The gate, rule by rule, and every pair of rules against each other: when
//! two would stop a call, the one earlier in SPEC's precedence decides.

use super::*;
use crate::decide::budget::BudgetName;

const PLAN: &str = "plan-digest";

fn request() -> RequestDigest {
    RequestDigest::new("request-digest")
}

fn budgets() -> Budgets {
    Budgets { max_attempts_per_task: 3, max_revisions: 3, max_provider_calls: 10, max_cost: 1.0, deadline_seconds: 60 }
}

fn usage() -> Usage {
    Usage { attempts_of_task: 0, provider_calls: 0, cost: Cost::ZERO, elapsed_seconds: 0 }
}

fn approval(id: i64, request: &str, plan: &str) -> OpenApproval {
    OpenApproval {
        id: ApprovalId(id),
        request_digest: RequestDigest::new(request),
        plan_digest: plan.to_string(),
        revision: Revision(2),
        cost: Some(Cost::ZERO),
        expires_at_ms: None,
    }
}

/// Another goal's unknown try of the same request.
fn same_request() -> SameRequest {
    SameRequest {
        attempt: AttemptId(3),
        operation_id: OperationId::new("op_first"),
        goal_id: GoalId::new("other-goal"),
        task_ref: "send".into(),
        state: AttemptState::EffectUnknown,
    }
}

/// The rules that can stop a call, each as a change to passing facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    PlanMoved,
    Unsettled,
    SameRequest,
    Conflict,
    Budget,
    Approval,
}

const PRECEDENCE: [Stop; 6] =
    [Stop::PlanMoved, Stop::Unsettled, Stop::SameRequest, Stop::Conflict, Stop::Budget, Stop::Approval];

/// Facts that pass every rule, with `stops` applied, decided.
fn decide_with(stops: &[Stop], open: &[OpenApproval]) -> Decision {
    let request = request();
    let budgets = budgets();
    let mut f = Facts {
        revision: Revision(2),
        active_revision: Revision(2),
        plan_digest: PLAN,
        active_plan_digest: PLAN,
        unsettled: None,
        same_request: None,
        conflict: None,
        request_digest: &request,
        budgets: &budgets,
        usage: usage(),
        call_cost: Cost::ZERO,
        may_spend: false,
        approval: ApprovalFacts {
            always: false,
            paid_or_external: false,
            asked_repeat: false,
            prior_dispatch: false,
            open,
        },
        now_ms: 0,
    };
    for stop in stops {
        match stop {
            Stop::PlanMoved => f.active_revision = Revision(3),
            Stop::Unsettled => f.unsettled = Some((AttemptId(7), AttemptState::EffectUnknown)),
            Stop::SameRequest => f.same_request = Some(same_request()),
            Stop::Conflict => f.conflict = Some(RequestDigest::new("other")),
            Stop::Budget => f.usage.provider_calls = 10,
            Stop::Approval => f.approval.always = true,
        }
    }
    decide(&f)
}

fn stop_of(d: &Decision) -> Option<Stop> {
    match d {
        Decision::PlanMoved { .. } => Some(Stop::PlanMoved),
        Decision::Unsettled { .. } => Some(Stop::Unsettled),
        Decision::SameRequest(_) => Some(Stop::SameRequest),
        Decision::Conflict { .. } => Some(Stop::Conflict),
        Decision::Budget(_) => Some(Stop::Budget),
        Decision::AwaitApproval(_) => Some(Stop::Approval),
        Decision::Go { .. } => None,
        Decision::AnswerExpired { .. } => panic!("decide weighs no answer: answer_expired does"),
    }
}

#[test]
fn passing_facts_go() {
    assert_eq!(decide_with(&[], &[]), Decision::Go { consume: None, void: vec![] });
}

#[test]
fn each_rule_alone_stops_the_call_with_its_reason() {
    assert_eq!(decide_with(&[Stop::PlanMoved], &[]), Decision::PlanMoved { active: Revision(3) });
    assert_eq!(
        decide_with(&[Stop::Unsettled], &[]),
        Decision::Unsettled { attempt: AttemptId(7), state: AttemptState::EffectUnknown }
    );
    assert_eq!(decide_with(&[Stop::SameRequest], &[]), Decision::SameRequest(same_request()));
    assert_eq!(decide_with(&[Stop::Conflict], &[]), Decision::Conflict { recorded: RequestDigest::new("other") });
    match decide_with(&[Stop::Budget], &[]) {
        Decision::Budget(e) => assert_eq!(e.budget, BudgetName::MaxProviderCalls),
        other => panic!("{other:?}"),
    }
    assert_eq!(decide_with(&[Stop::Approval], &[]), Decision::AwaitApproval(Missing::None));
}

#[test]
fn every_pair_of_rules_resolves_by_precedence() {
    for (i, &first) in PRECEDENCE.iter().enumerate() {
        for &later in &PRECEDENCE[i + 1..] {
            for stops in [[first, later], [later, first]] {
                assert_eq!(stop_of(&decide_with(&stops, &[])), Some(first), "{first:?} outranks {later:?}");
            }
        }
    }
    // And all at once: the first rule of all.
    assert_eq!(stop_of(&decide_with(&PRECEDENCE, &[])), Some(Stop::PlanMoved));
}

#[test]
fn a_changed_plan_digest_on_the_same_revision_is_a_moved_plan() {
    let request = request();
    let budgets = budgets();
    let f = Facts {
        revision: Revision(1),
        active_revision: Revision(1),
        plan_digest: PLAN,
        active_plan_digest: "another",
        unsettled: None,
        same_request: None,
        conflict: None,
        request_digest: &request,
        budgets: &budgets,
        usage: usage(),
        call_cost: Cost::ZERO,
        may_spend: false,
        approval: ApprovalFacts {
            always: false,
            paid_or_external: false,
            asked_repeat: false,
            prior_dispatch: false,
            open: &[],
        },
        now_ms: 0,
    };
    assert_eq!(decide(&f), Decision::PlanMoved { active: Revision(1) });
}

#[test]
fn an_approval_is_needed_always_or_for_a_paid_or_external_repeat() {
    let a = |always, paid_or_external, asked_repeat, prior_dispatch| ApprovalFacts {
        always,
        paid_or_external,
        asked_repeat,
        prior_dispatch,
        open: &[],
    };
    assert!(a(true, false, false, false).needed(), "requires_approval gates the first call");
    assert!(!a(false, true, false, false).needed(), "a first paid/external call needs none");
    assert!(a(false, true, true, false).needed(), "a person's retry or repair is a repeat");
    assert!(a(false, true, false, true).needed(), "a call after a dispatched one is a repeat");
    assert!(!a(false, false, true, true).needed(), "free, local work repeats without one");
}

#[test]
fn the_matching_approval_is_consumed_even_behind_a_stale_one() {
    let open = [approval(9, "request-digest", "old-plan"), approval(4, "request-digest", PLAN)];
    assert_eq!(
        decide_with(&[Stop::Approval], &open),
        Decision::Go { consume: Some(ApprovalId(4)), void: vec![ApprovalId(9)] }
    );
}

#[test]
fn one_call_spends_one_approval_and_the_others_go_with_it() {
    // Two approvals of the same request (a person approved twice): the call
    // spends the newest and voids the other, so no later try is paid for.
    let open = [approval(7, "request-digest", PLAN), approval(3, "request-digest", PLAN)];
    assert_eq!(
        decide_with(&[Stop::Approval], &open),
        Decision::Go { consume: Some(ApprovalId(7)), void: vec![ApprovalId(3)] }
    );
}

#[test]
fn a_stale_approval_names_what_differs() {
    let other_request = [approval(5, "other-request", PLAN)];
    match decide_with(&[Stop::Approval], &other_request) {
        Decision::AwaitApproval(Missing::Stale { approval_id, why }) => {
            assert_eq!(approval_id, ApprovalId(5));
            assert!(why.contains("differs from this request's request-digest"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    let other_plan = [approval(6, "request-digest", "old-plan")];
    match decide_with(&[Stop::Approval], &other_plan) {
        Decision::AwaitApproval(m) => {
            assert_eq!(m.why(), "approval 6 is stale: the plan changed since the approval was given")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_approval_binds_the_revision_and_the_cost_and_a_stale_one_names_each_change() {
    let one = Cost::from_units(1.0).unwrap();
    let request = request();
    let budgets = Budgets { max_cost: 10.0, ..budgets() };
    let facts = |open: &[OpenApproval], call_cost: Cost| {
        let f = Facts {
            revision: Revision(2),
            active_revision: Revision(2),
            plan_digest: PLAN,
            active_plan_digest: PLAN,
            unsettled: None,
            same_request: None,
            conflict: None,
            request_digest: &request,
            budgets: &budgets,
            usage: usage(),
            call_cost,
            may_spend: false,
            approval: ApprovalFacts {
                always: true,
                paid_or_external: true,
                asked_repeat: false,
                prior_dispatch: false,
                open,
            },
            now_ms: 0,
        };
        decide(&f)
    };
    let at = |revision: i64, cost: Option<Cost>| OpenApproval {
        revision: Revision(revision),
        cost,
        ..approval(8, "request-digest", PLAN)
    };
    assert_eq!(facts(&[at(2, Some(one))], one), Decision::Go { consume: Some(ApprovalId(8)), void: vec![] });
    // Recorded before approvals bound the cost: the plan digest covers it.
    assert_eq!(facts(&[at(2, None)], one), Decision::Go { consume: Some(ApprovalId(8)), void: vec![] });
    let stale = |d: Decision| match d {
        Decision::AwaitApproval(Missing::Stale { approval_id, why }) => (approval_id, why),
        other => panic!("{other:?}"),
    };
    let (id, why) = stale(facts(&[at(2, Some(one))], Cost::from_units(2.0).unwrap()));
    assert_eq!((id, why.as_str()), (ApprovalId(8), "the cost changed: approved 1, this call costs 2"));
    let (_, why) = stale(facts(&[OpenApproval { plan_digest: "old-plan".into(), ..at(1, Some(one)) }], one));
    assert_eq!(why, "the plan revision changed: approved at revision 1, this call is of revision 2");
    let both = OpenApproval { plan_digest: "old-plan".into(), ..at(1, Some(Cost::ZERO)) };
    let (_, why) = stale(facts(&[both], one));
    assert!(why.contains("revision 1") && why.contains("approved 0, this call costs 1"), "{why}");
}

#[test]
fn an_approval_the_call_did_not_need_is_voided_not_kept() {
    let open = [approval(2, "request-digest", PLAN), approval(1, "request-digest", PLAN)];
    assert_eq!(decide_with(&[], &open), Decision::Go { consume: None, void: vec![ApprovalId(2), ApprovalId(1)] });
}

#[test]
fn a_stopped_call_neither_consumes_nor_voids() {
    let open = [approval(2, "request-digest", PLAN)];
    for stop in [Stop::PlanMoved, Stop::Unsettled, Stop::Conflict, Stop::Budget] {
        assert!(!matches!(decide_with(&[stop, Stop::Approval], &open), Decision::Go { .. }), "{stop:?}");
        assert!(!matches!(decide_with(&[stop], &open), Decision::Go { .. }), "{stop:?}");
    }
}

#[test]
fn an_expired_approval_pays_for_nothing_and_says_so() {
    let request = request();
    let budgets = budgets();
    let mut open = approval(7, request.as_str(), PLAN);
    open.expires_at_ms = Some(1_000);
    let opens = [open];
    let f = |now_ms| Facts {
        revision: Revision(2),
        active_revision: Revision(2),
        plan_digest: PLAN,
        active_plan_digest: PLAN,
        unsettled: None,
        same_request: None,
        conflict: None,
        request_digest: &request,
        budgets: &budgets,
        usage: usage(),
        call_cost: Cost::ZERO,
        may_spend: false,
        approval: ApprovalFacts {
            always: true,
            paid_or_external: false,
            asked_repeat: false,
            prior_dispatch: false,
            open: &opens,
        },
        now_ms,
    };
    assert_eq!(decide(&f(999)), Decision::Go { consume: Some(ApprovalId(7)), void: vec![] });
    for now in [1_000, 5_000] {
        match decide(&f(now)) {
            Decision::AwaitApproval(m @ Missing::Expired { .. }) => assert!(m.why().contains("expired"), "{}", m.why()),
            other => panic!("an expired approval was weighed as {other:?}"),
        }
    }
}

#[test]
fn an_approval_asked_for_says_why_it_is_needed() {
    let facts = |always, paid_or_external, asked_repeat, prior_dispatch| ApprovalFacts {
        always,
        paid_or_external,
        asked_repeat,
        prior_dispatch,
        open: &[],
    };
    // The first call in revision 2 of external work that took effect in
    // revision 1: the words the issue asks for.
    let n = facts(false, true, false, true).needed_because(Some((Revision(1), true)), Revision(2), Work::External);
    assert_eq!(
        n,
        Needed::Repeat { revision: Some(Revision(1)), now: Revision(2), succeeded: true, work: Work::External }
    );
    assert_eq!(
        n.words(),
        "the first call in revision 2 of external work that already took effect in revision 1; \
         a new call of external work needs a person's approval"
    );
    // A repeat within the revision of paid work that was sent and may have
    // taken effect: never claimed more.
    let n = facts(false, true, false, true).needed_because(Some((Revision(2), false)), Revision(2), Work::Paid);
    assert_eq!(
        n.words(),
        "a repeat of paid work that was already sent in revision 2 and may have taken effect; \
         a new call of paid work needs a person's approval"
    );
    // A person's retry; a first call the task declares needs one.
    assert_eq!(
        facts(false, true, true, false).needed_because(None, Revision(1), Work::External),
        Needed::PersonsRepeat
    );
    let first = facts(true, false, false, false).needed_because(None, Revision(1), Work::External);
    assert_eq!(first, Needed::Declared);
    assert!(first.words().contains("the first included"), "{}", first.words());
}

#[test]
fn a_call_carrying_an_answer_past_its_time_is_never_made() {
    assert_eq!(answer_expired(None, 10_000), None);
    assert_eq!(answer_expired(Some((3, 10_001)), 10_000), None);
    assert_eq!(answer_expired(Some((3, 10_000)), 10_000), Some(Decision::AnswerExpired { ask_id: 3, at_ms: 10_000 }));
    assert_eq!(answer_expired(Some((3, 5_000)), 10_000), Some(Decision::AnswerExpired { ask_id: 3, at_ms: 5_000 }));
}
